"""dynograph-viz and DYNOGRAPH_DUMP: every stage, every format, validated.

The command line runs in subprocesses on a tiny compiled MLP training step (three steps); the
formats are checked by parsing them back (IR text, JSON, XML) and, where installed, by Graphviz
and headless Chromium (which also takes a screenshot kept under tests/artifacts/)."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

import dynograph
import dynograph.viz as viz
from dynograph.compiler import dump
from dynograph.compiler.ir import Graph, Input, Node, TensorType, Value
from dynograph.compiler.text import parse_graph, print_graph
from dynograph.runtime import dtypes as D
from dynograph.viz import cli

ARTIFACTS = os.path.join(os.path.dirname(__file__), "artifacts")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DOT = shutil.which("dot")

MLP = textwrap.dedent("""
    import dynograph as torch
    import dynograph.nn as nn
    import dynograph.nn.functional as F

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)


    @torch.compile
    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss


    x = torch.randn(6, 8)
    y = torch.randint(0, 4, (6,))
    for _ in range(3):
        loss = train_step(x, y)
    out = F.cross_entropy(model(x), y)
    """)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "dynograph.viz", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """A run of the CLI on the MLP script writing every format; returns the dump folder."""
    root = tmp_path_factory.mktemp("viz")
    (root / "mlp.py").write_text(MLP)
    done = _cli("run", "mlp.py", "--format", "text,json,dot,svg,html", "-o", "dump", cwd=root)
    assert done.returncode == 0, done.stderr
    return root / "dump"


def _compiled_mlp():
    env = {}
    exec(compile(MLP, "mlp.py", "exec"), env)
    return env


def _graph_file(dumped, stage, ext):
    return dumped / f"train_step.0.{stage}{ext}"


# ---------------------------------------------------------------- the dump

def test_run_writes_every_stage(dumped):
    index = json.loads((dumped / "index.json").read_text())
    entries = index["functions"]["train_step"]
    assert len(entries) >= 1            # the first call (no .grad yet) may specialize apart
    graphs = {"captured", "optimized", "fused"}
    for i, entry in enumerate(entries):
        files = entry["files"]
        # the llvm backend (the default) adds its stages once a specialization has run
        assert graphs <= set(files) and set(files) - graphs <= {"kernels", "llvm"}
        for stage in graphs:
            assert sorted(files[stage]) == sorted(f"train_step.{i}.{stage}{e}"
                                                  for e in (".dg", ".json", ".dot", ".svg", ".html"))
    assert any({"kernels", "llvm"} <= set(entry["files"]) for entry in entries)
    assert "fused" not in _graph_file(dumped, "captured", ".dg").read_text()
    assert "fused" not in _graph_file(dumped, "optimized", ".dg").read_text()


@pytest.mark.parametrize("stage", ["captured", "optimized", "fused"])
def test_text_parses_back(dumped, stage):
    text = _graph_file(dumped, stage, ".dg").read_text()
    graph = parse_graph(text)
    assert print_graph(graph) + "\n" == text
    assert len(graph.nodes) > 5


def test_optimized_stage_is_the_pipeline_before_fusion():
    env = _compiled_mlp()
    entry = env["train_step"].entries[0]
    (_, _, optimized), = [s for s in dump.entry_stages(entry, ("optimized",))]
    assert not any(n.op == "fused" for n in optimized.nodes)
    assert len(optimized.nodes) < len(entry.captured.nodes)
    inlined = dump.inline_kernels(entry.graph)
    assert not any(n.op == "fused" for n in inlined.nodes)
    members = sum(len(n.attrs["graph"].nodes) if "graph" in n.attrs else 1 for n in entry.graph.nodes)
    assert len(inlined.nodes) == members
    parse_graph(print_graph(inlined))           # every value still defined before use


@pytest.mark.parametrize("stage", ["captured", "fused"])
def test_json_matches_the_graph(dumped, stage):
    data = json.loads(_graph_file(dumped, stage, ".json").read_text())
    graph = parse_graph(data["text"])
    drawn = viz.from_ir(graph)
    assert [n["label"] for n in data["nodes"]] == [n.label for n in drawn.nodes]
    assert len(data["edges"]) == len(drawn.edges)
    ids = {n["id"] for n in data["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in data["edges"])
    ops = [n for n in data["nodes"] if n["kind"] == "op"]
    assert all(n["types"] and n["source"] for n in ops), "every op has types and a source line"
    inputs = [n["label"] for n in data["nodes"] if n["kind"] in ("input", "param")]
    assert inputs == [i.name for i in graph.inputs if i.kind in ("input", "param")]
    if stage == "fused":
        kernels = {n.attrs["name"] for n in graph.nodes if n.op == "fused"}
        assert set(data["groups"]) == kernels


def _dot_nodes(text):
    return re.findall(r'^\s*"([^"]+)" \[label=', text, re.M)


def test_dot_has_every_node_and_clusters(dumped):
    text = _graph_file(dumped, "fused", ".dot").read_text()
    data = json.loads(_graph_file(dumped, "fused", ".json").read_text())
    assert sorted(_dot_nodes(text)) == sorted(n["id"] for n in data["nodes"])
    assert len(re.findall(r"-> ", text)) == len(data["edges"])
    assert len(re.findall(r"subgraph \"cluster_k\d+\"", text)) == len(data["groups"]) > 0
    if DOT is None:
        pytest.skip("Graphviz's dot is not installed: DOT checked by its structure only")
    done = subprocess.run([DOT, "-Tplain"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sum(1 for ln in done.stdout.splitlines() if ln.startswith("node ")) == len(data["nodes"])


def _svg_nodes(text):
    root = ET.fromstring(text.split("?>", 1)[-1] if text.startswith("<?xml") else text)
    return [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"]


@pytest.mark.parametrize("stage", ["captured", "fused"])
def test_svg_is_xml_with_one_element_per_node(dumped, stage):
    data = json.loads(_graph_file(dumped, stage, ".json").read_text())
    assert len(_svg_nodes(_graph_file(dumped, stage, ".svg").read_text())) == len(data["nodes"])


def test_builtin_svg_without_graphviz():
    graph = _compiled_mlp()["train_step"].entries[0].graph
    drawn = viz.from_ir(graph)
    text = viz.render(graph, "svg", engine="builtin")
    assert len(_svg_nodes(text)) == len(drawn.nodes)
    assert text.count('class="edge"') == len(drawn.edges)


# ---------------------------------------------------------------- HTML in a browser

def _chromium(*args, timeout=60):
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _console_errors(stderr):
    """Console messages of the page (Chromium logs them all at INFO, errors included); the
    viewer logs nothing, so any message is a failure."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln]


def test_console_errors_are_caught(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<html><body><script>console.error("boom"); missing();</script></body></html>')
    errors = _console_errors(_chromium("--dump-dom", page.as_uri()).stderr)
    assert any('"boom"' in e for e in errors) and any("Uncaught ReferenceError" in e for e in errors)


def test_html_runs_in_chromium(dumped):
    page = _graph_file(dumped, "fused", ".html")
    text = page.read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text, "the page is self-contained"
    done = _chromium("--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert not _console_errors(done.stderr), _console_errors(done.stderr)
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', text,
                                re.S).group(1))
    first = data["views"][0]
    assert len(re.findall(r'<g class="node" data-i="\d+"', done.stdout)) == len(first["nodes"])
    assert len(re.findall(r'<path class="edge" data-i="\d+"', done.stdout)) == len(first["edges"])
    assert {v["name"] for v in data["views"]} == {"ops", "kernels"}
    kernels = [n for n in data["views"][1]["nodes"] if n["kind"] == "fused"]
    assert kernels and all(n["detail"].startswith("graph {") for n in kernels)


def test_html_search_and_details_panel(tmp_path):
    entry = _compiled_mlp()["train_step"].entries[0]
    node = next(n for n in entry.graph.nodes if n.op == "fused")
    kernel = node.attrs["name"]
    page = tmp_path / "step.html"
    page.write_text(viz.render(entry.graph, "html", code={kernel: "define void @generated_code() {}"}))
    done = _chromium("--dump-dom", page.as_uri() + f"#search={kernel}")
    assert not _console_errors(done.stderr), _console_errors(done.stderr)
    dom = done.stdout
    members = len(node.attrs["graph"].nodes)           # the kernel's ops are found by its name
    assert len(re.findall(r'<g class="node match( selected)?" data-i', dom)) == members > 0
    assert f">{members} found<" in dom
    panel = re.search(r'<div id="side" style="display: block;">(.*?)</div>', dom, re.S).group(1)
    first = node.attrs["graph"].nodes[0]
    assert f"<h3>{first.op}</h3>" in panel and str(first.outs[0].type) in panel   # op, types
    assert "mlp.py:" in panel and f"<td>{kernel}</td>" in panel                   # source, kernel
    assert "generated code" in panel and "define void @generated_code() {}" in panel


def test_screenshot_of_a_training_step(dumped):
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "train_step.fused.png")
    if os.path.exists(shot):
        os.remove(shot)
    done = _chromium(f"--screenshot={shot}", "--window-size=1400,1000",
                     _graph_file(dumped, "fused", ".html").as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert os.path.getsize(shot) > 10_000
    print(f"screenshot: {shot}")


# ---------------------------------------------------------------- large graphs

def _synthetic(n_nodes):
    """A graph of ``n_nodes`` ops: parallel chains that meet, some of them fused kernels."""
    f32 = TensorType((32, 64), D.float32)
    inputs = [Input(Value(f32), "param", f"layer{k}.weight") for k in range(20)]
    graph = Graph(inputs=inputs)
    live = [i.value for i in inputs]
    ops = ["add", "mul", "sub"]
    k = 0
    while len(graph.nodes) < n_nodes:
        a, b = live[-1 - k % 7], live[-1 - (k * 3) % 11]
        out = Value(f32)
        if k % 10 == 9:                             # a fused kernel of three members
            sub = Graph(inputs=[Input(Value(f32), "input", "a0"), Input(Value(f32), "input", "a1")])
            x, y = sub.inputs[0].value, sub.inputs[1].value
            v1, v2, v3 = Value(f32), Value(f32), Value(f32)
            sub.nodes = [Node("add", (x, y), {}, (v1,)), Node("relu", (v1,), {}, (v2,)),
                         Node("mul", (v2, x), {}, (v3,))]
            sub.outputs = [v3]
            graph.nodes.append(Node("fused", (a, b), {"graph": sub, "name": f"k{k}"}, (out,)))
        else:
            graph.nodes.append(Node(ops[k % 3], (a, b), {}, (out,), f"net.py:{k % 50} in forward"))
        live.append(out)
        k += 1
    graph.outputs = [live[-1]]
    return graph


def test_large_graph_renders_quickly():
    graph = _synthetic(3000)
    start = time.perf_counter()
    svg = viz.render(graph, "svg", engine="builtin")
    html = viz.render(graph, "html")
    elapsed = time.perf_counter() - start
    assert elapsed < 10, f"3000 nodes took {elapsed:.1f}s"
    drawn = viz.from_ir(graph, expand=False)       # over 2000 ops: kernels drawn as one box each
    assert len(_svg_nodes(svg)) == len(drawn.nodes)
    views = json.loads(re.search(r'id="data">(.*?)</script>', html, re.S).group(1).replace("<\\/", "</"))
    assert [v["name"] for v in views["views"]] == ["kernels", "source lines"]   # big: no op view
    kernels = sum(1 for n in views["views"][0]["nodes"] if n["kind"] == "fused")
    assert kernels == sum(1 for n in graph.nodes if n.op == "fused")
    assert len(drawn.nodes) == 3000 + 20 + 1
    lines = viz.collapse_sources(drawn)
    # lines k % 50 of the plain ops (every tenth op, k % 10 == 9, is a kernel without a line)
    assert sum(1 for n in lines.nodes if n.kind == "source") == 45
    assert len(lines.nodes) == 45 + 20 + 1 + 300
    assert len(_svg_nodes(viz.render(lines, "svg", engine="builtin"))) == len(lines.nodes)


# ---------------------------------------------------------------- code stages

def test_code_stages_appear_when_the_entry_has_them(tmp_path):
    entry = _compiled_mlp()["train_step"].entries[0]
    kernel = next(n.attrs["name"] for n in entry.graph.nodes if n.op == "fused")
    entry.llvm_ir = {kernel: "define void @%s() {\n  ret void\n}" % kernel}
    entry.kernels = [f"kernel {kernel}: for i in [0, 96): store out[i] = a[i] + b[i]"]
    written = dump.dump_entry(str(tmp_path), "step", 0, entry, formats=("html",))
    names = sorted(os.path.basename(p) for p in written)
    assert names == ["step.0.captured.html", "step.0.fused.html", "step.0.kernels.txt",
                     "step.0.llvm.ll", "step.0.optimized.html"]
    assert f"// kernel {kernel}\ndefine void @{kernel}()" in (tmp_path / "step.0.llvm.ll").read_text()
    page = (tmp_path / "step.0.fused.html").read_text()
    assert f"define void @{kernel}()" in page         # the kernel's code in the side panel


def test_dump_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setattr(dump, "STATE", dump._State())
    dump.STATE.exit_hook = True                     # no second dump at this process's exit
    monkeypatch.setenv("DYNOGRAPH_DUMP", str(tmp_path))
    monkeypatch.setenv("DYNOGRAPH_DUMP_FORMATS", "text,json")
    env = _compiled_mlp()
    compiled = env["train_step"]

    @dynograph.compile
    def train_step(x):                                # a second function of the same name
        return (x * 2).sum()
    train_step(dynograph.ones(3))
    written = sorted(os.listdir(tmp_path))
    assert "train_step.0.fused.dg" in written and "train_step-2.0.fused.dg" in written
    assert "train_step.0.captured.json" in written
    assert parse_graph((tmp_path / "train_step.0.fused.dg").read_text()).nodes
    assert print_graph(compiled.entries[0].graph) + "\n" == (tmp_path / "train_step.0.fused.dg").read_text()
    index = json.loads((tmp_path / "index.json").read_text())
    assert set(index["functions"]) == {"train_step", "train_step-2"}


# ---------------------------------------------------------------- show and errors

@pytest.mark.parametrize("fmt", ["text", "json", "dot", "svg", "html"])
def test_show_renders_a_dumped_file(dumped, tmp_path, fmt, capsys):
    out = tmp_path / f"graph.{fmt}"
    assert cli.main(["show", str(_graph_file(dumped, "fused", ".dg")), "-o", str(out)]) == 0
    text = out.read_text()
    if fmt == "text":
        assert text == _graph_file(dumped, "fused", ".dg").read_text()
    elif fmt == "json":
        assert json.loads(text)["text"] + "\n" == _graph_file(dumped, "fused", ".dg").read_text()
    else:
        assert text.strip()


def test_show_reads_json_and_exported_programs(dumped, tmp_path, capsys):
    assert cli.main(["show", str(_graph_file(dumped, "optimized", ".json"))]) == 0
    assert capsys.readouterr().out == _graph_file(dumped, "optimized", ".dg").read_text()
    import dynograph.export
    from dynograph.compiler.text import print_graph
    model = dynograph.nn.Sequential(dynograph.nn.Linear(3, 4), dynograph.nn.ReLU())
    program = dynograph.export.export(model, (dynograph.ones(2, 3),))
    dynograph.export.save(program, tmp_path / "program.dgx")
    assert cli.main(["show", str(tmp_path / "program.dgx")]) == 0
    assert capsys.readouterr().out == print_graph(program.graph) + "\n"
    assert cli.main(["show", str(tmp_path / "program.dgx"), "--format", "dot"]) == 0
    assert capsys.readouterr().out.startswith('digraph "Sequential"')
    # a checkpoint that is not an exported program, and a folder, are refused in one line
    dynograph.save({"w": dynograph.ones(2)}, tmp_path / "state.pt")
    assert "not an exported program" in _one_line_error(capsys, ["show", str(tmp_path / "state.pt")], 1)
    assert "is a folder" in _one_line_error(capsys, ["show", str(tmp_path)], 1)


def _one_line_error(capsys, argv, code):
    assert cli.main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("dynograph-viz: error: "), err
    return err


def test_errors_are_one_line(tmp_path, monkeypatch, capsys):
    _in_process(monkeypatch, tmp_path)
    assert "no such script" in _one_line_error(capsys, ["run", str(tmp_path / "missing.py")], 2)
    assert "unknown stage 'asm'" in _one_line_error(capsys, ["run", "x.py", "--stage", "asm"], 2)
    assert "unknown format 'png'" in _one_line_error(capsys, ["run", "x.py", "--format", "png"], 2)
    assert "unknown format" in _one_line_error(capsys, ["show", "x.dg", "--format", "pdf"], 2)
    bad = tmp_path / "bad.dg"
    bad.write_text("graph {\n  %0: f32[2] = frob(%7)\n}\n")
    assert "bad.dg" in _one_line_error(capsys, ["show", str(bad)], 1)
    binary = tmp_path / "blob.dg"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "not a text file" in _one_line_error(capsys, ["show", str(binary)], 1)
    assert "no such file" in _one_line_error(capsys, ["show", str(tmp_path / "none.dg")], 1)
    assert sorted(os.listdir(tmp_path)) == ["bad.dg", "blob.dg"]      # nothing written
    assert "DYNOGRAPH_DUMP" not in os.environ


def test_help_explains_options_and_examples(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for word in ("run SCRIPT.py", "show FILE", "autograd SCRIPT.py --tensor NAME", "captured",
                 "optimized", "kernels", "llvm", "cuda", "--format", "DYNOGRAPH_DUMP", "examples:"):
        assert word in out


def _in_process(monkeypatch, tmp_path):
    """Run scripts through ``cli.main`` here: the dump settings and state are put back after."""
    for var in ("DYNOGRAPH_DUMP", "DYNOGRAPH_DUMP_STAGES", "DYNOGRAPH_DUMP_FORMATS"):
        monkeypatch.setenv(var, "")           # recorded, so put back (or removed) afterwards
        monkeypatch.delenv(var)
    monkeypatch.setattr(dump, "STATE", dump._State())
    dump.STATE.exit_hook = True
    monkeypatch.chdir(tmp_path)


def test_script_that_raises_keeps_what_was_compiled(tmp_path, monkeypatch, capsys):
    _in_process(monkeypatch, tmp_path)
    (tmp_path / "fails.py").write_text(MLP + "\nraise ValueError('after three steps')\n")
    assert cli.main(["run", "fails.py", "-o", "out", "--stage", "fused"]) == 1
    assert "DYNOGRAPH_DUMP_STAGES" not in os.environ          # the settings are put back
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: after three steps" in err
    assert 'fails.py", line' in err and "cli.py" not in err
    written = set(os.listdir(tmp_path / "out"))
    assert {"index.json", "train_step.0.fused.dg", "train_step.0.fused.json"} <= written
    assert all(".fused." in f for f in written - {"index.json"})


# ---------------------------------------------------------------- autograd graphs

def _grad_fns(t):
    seen, stack = {}, [t.grad_fn]
    while stack:
        f = stack.pop()
        if f is not None and id(f) not in seen:
            seen[id(f)] = f
            stack += [n for n, _ in f.next_functions]
    return seen.values()


def test_autograd_graph_from_python():
    env = _compiled_mlp()
    out = env["out"]
    drawn = viz.autograd_graph(out, dict(env["model"].named_parameters()))
    fns = list(_grad_fns(out))
    assert len(drawn.nodes) == len(fns) + 1                 # and the tensor itself
    labels = [n.label for n in drawn.nodes]
    assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= set(labels)
    assert {f.name() for f in fns if not hasattr(f, "variable")} <= set(labels)
    for fmt in ("text", "dot", "svg", "html", "json"):
        assert drawn.render(fmt)
    assert len(_svg_nodes(drawn.render("svg"))) == len(drawn.nodes)


def test_autograd_command(tmp_path, monkeypatch, capsys):
    _in_process(monkeypatch, tmp_path)
    (tmp_path / "mlp.py").write_text(MLP)
    assert cli.main(["autograd", "mlp.py", "--tensor", "out", "-o", "out.json"]) == 0
    data = json.loads((tmp_path / "out.json").read_text())
    labels = {n["label"] for n in data["nodes"]}
    assert {"model.0.weight", "model.2.bias", "AddmmBackward0", "ReluBackward0"} <= labels
    err = _one_line_error(capsys, ["autograd", "mlp.py", "--tensor", "nothing"], 2)
    assert "no global variable 'nothing'" in err


def test_llvm_backend_kernels_and_ir_are_dumped(tmp_path):
    from dynograph.compiler.backends import get_runner
    try:
        get_runner("llvm")
    except Exception as e:
        pytest.skip(f"no LLVM backend: {e}")
    env = {}
    exec(compile(MLP.replace("@torch.compile", '@torch.compile(backend="llvm")'), "mlp.py", "exec"), env)
    compiled = env["train_step"]
    entry = next(e for e in compiled.entries if e.calls)            # replayed: kernels compiled
    written = dump.dump_entry(str(tmp_path), "step", 0, entry, formats=("html",))
    names = {os.path.basename(p) for p in written}
    assert {"step.0.kernels.txt", "step.0.llvm.ll"} <= names
    kernels = (tmp_path / "step.0.kernels.txt").read_text()
    fused = [n.attrs["name"] for n in entry.graph.nodes if n.op == "fused"]
    assert f"// kernel {fused[0]}\nkernel " in kernels
    assert "define void @dg_" in (tmp_path / "step.0.llvm.ll").read_text()
    assert "define void @dg_" in (tmp_path / "step.0.fused.html").read_text()


def test_console_script_is_declared():
    from importlib.metadata import PackageNotFoundError, entry_points
    try:
        found = [ep for ep in entry_points(group="console_scripts") if ep.name == "dynograph-viz"]
    except PackageNotFoundError:
        found = []
    if not found:
        pytest.skip("dynograph is installed without the dynograph-viz script (reinstall it)")
    assert found[0].value == "dynograph.viz.cli:main"
    assert found[0].load() is cli.main


def test_dump_of_a_compiled_module_with_a_backward_graph(tmp_path, monkeypatch):
    monkeypatch.setattr(dump, "STATE", dump._State())
    dump.STATE.exit_hook = True
    monkeypatch.setenv("DYNOGRAPH_DUMP", str(tmp_path))
    monkeypatch.setenv("DYNOGRAPH_DUMP_FORMATS", "text,html")
    model = dynograph.nn.Sequential(dynograph.nn.Linear(4, 8), dynograph.nn.Tanh(),
                                    dynograph.nn.Linear(8, 1))
    compiled = dynograph.compile(model)
    compiled(dynograph.randn(3, 4)).pow(2).mean().backward()
    entry = compiled._compiled_call.entries[0]
    assert entry.backward_graph is not None
    stages = [s for s, _ in json.loads((tmp_path / "index.json").read_text())
              ["functions"]["Sequential"][0]["files"].items()]
    assert stages == ["captured", "optimized", "fused", "backward.optimized", "backward.fused"]
    text = (tmp_path / "Sequential.0.backward.fused.dg").read_text()
    assert text == print_graph(entry.backward_graph) + "\n"
    assert "Sequential.0.backward.fused.html" in (tmp_path / "index.html").read_text()
