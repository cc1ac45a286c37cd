"""Pictures of graphs: the compiler's IR at every stage and the dynamic autograd graph.

    import dynograph.viz as viz
    viz.render(step.graphs()[0], format="html")     # text, dot, svg, html or json
    viz.autograd_graph(loss).render("svg")         # like torchviz's make_dot(loss)

The command line tool ``dynograph-viz`` (``dynograph/viz/cli.py``) runs a script with every
compilation dumped, renders a dumped or exported graph file, and draws autograd graphs.
``DYNOGRAPH_DUMP=folder`` dumps the stages of every compilation of any program.
"""
from .model import VizGraph, VizNode, collapse_sources, from_autograd, from_ir
from .render import FORMATS, render


def autograd_graph(tensor, params=None):
    """The dynamic autograd graph behind ``tensor`` (its ``grad_fn`` and everything it reaches)
    as a ``VizGraph``; ``params`` (a name -> tensor dict such as
    ``dict(model.named_parameters())``) names the leaves.  ``.render(format)`` draws it."""
    return from_autograd(tensor, params)


__all__ = ["FORMATS", "VizGraph", "VizNode", "autograd_graph", "collapse_sources", "from_autograd",
           "from_ir", "render"]
