"""dynograph.vision.models against torchvision: parameter counts, state_dict keys, outputs.

torchvision is not installed here, so resnet, mobilenet_v2 and LeNet are rebuilt below in plain
torch.nn following torchvision's source (LeNet: the CIFAR tutorial's Net, the benchmarks'
cifar_net); weights travel from the torch model through its state_dict, and both must give the
same outputs in eval mode.
"""
import numpy as np
import pytest
import torch
from torch import nn as tnn

import dynograph
from dynograph.vision import models
from tools.bench.workloads.training import cifar_net

# torchvision's published parameter counts (its model docs and weight metadata).
PARAM_COUNTS = {
    "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
    "alexnet": 61_100_840, "mobilenet_v2": 3_504_872,
    "vgg11": 132_863_336, "vgg11_bn": 132_868_840, "vgg16": 138_357_544, "vgg16_bn": 138_365_992,
}


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- torch references


class TorchBasicBlock(tnn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = tnn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.relu = tnn.ReLU(inplace=True)
        self.conv2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class TorchBottleneck(tnn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = tnn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.conv2 = tnn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.conv3 = tnn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = tnn.BatchNorm2d(planes * 4)
        self.relu = tnn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class TorchResNet(tnn.Module):
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = tnn.BatchNorm2d(64)
        self.relu = tnn.ReLU(inplace=True)
        self.maxpool = tnn.MaxPool2d(3, 2, 1)
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), layers)):
            setattr(self, f"layer{i + 1}", self._make_layer(block, planes, n, 1 if i == 0 else 2))
        self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
        self.fc = tnn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes, n, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = tnn.Sequential(tnn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                        tnn.BatchNorm2d(planes * block.expansion))
        blocks = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        blocks += [block(self.inplanes, planes) for _ in range(1, n)]
        return tnn.Sequential(*blocks)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _divisible(v, d=8):
    new_v = max(d, int(v + d / 2) // d * d)
    return new_v + d if new_v < 0.9 * v else new_v


def _conv_bn_relu6(inp, oup, k=3, stride=1, groups=1):
    return tnn.Sequential(tnn.Conv2d(inp, oup, k, stride, (k - 1) // 2, groups=groups, bias=False),
                          tnn.BatchNorm2d(oup), tnn.ReLU6(inplace=True))


class TorchInvertedResidual(tnn.Module):
    def __init__(self, inp, oup, stride, t):
        super().__init__()
        hidden = int(round(inp * t))
        self.use_res_connect = stride == 1 and inp == oup
        layers = [_conv_bn_relu6(inp, hidden, k=1)] if t != 1 else []
        layers += [_conv_bn_relu6(hidden, hidden, stride=stride, groups=hidden),
                   tnn.Conv2d(hidden, oup, 1, 1, 0, bias=False), tnn.BatchNorm2d(oup)]
        self.conv = tnn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class TorchMobileNetV2(tnn.Module):
    def __init__(self, num_classes=1000, width_mult=1.0):
        super().__init__()
        cin = _divisible(32 * width_mult)
        last = _divisible(1280 * max(1.0, width_mult))
        features = [_conv_bn_relu6(3, cin, stride=2)]
        for t, c, n, s in [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                           [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]:
            cout = _divisible(c * width_mult)
            for i in range(n):
                features.append(TorchInvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(_conv_bn_relu6(cin, last, k=1))
        self.features = tnn.Sequential(*features)
        self.classifier = tnn.Sequential(tnn.Dropout(0.2), tnn.Linear(last, num_classes))

    def forward(self, x):
        x = tnn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


TORCH_REFERENCES = {
    "resnet18": lambda: TorchResNet(TorchBasicBlock, [2, 2, 2, 2]),
    "resnet50": lambda: TorchResNet(TorchBottleneck, [3, 4, 6, 3]),
    "mobilenet_v2": TorchMobileNetV2,
    "lenet": lambda: cifar_net(torch),
}


def _randomized(ref):
    """The torch model in eval mode with non-trivial BatchNorm statistics and affine terms,
    so that a BatchNorm mixed up in loading changes the output."""
    torch.manual_seed(0)
    with torch.no_grad():
        for m in ref.modules():
            if isinstance(m, tnn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return ref.eval()


def _to_dynograph(state_dict):
    return {k: dynograph.from_numpy(v.detach().numpy().copy()) for k, v in state_dict.items()}


def _check_same_output(ref, model, size):
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = ref(x).numpy()
    with dynograph.no_grad():
        got = model.eval()(dynograph.from_numpy(x.numpy().copy())).numpy()
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * scale)


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("name", ["resnet18", "resnet34", "resnet50", "alexnet", "mobilenet_v2"])
def test_parameter_counts_and_output_shape(name):
    model = getattr(models, name)()
    assert n_params(model) == PARAM_COUNTS[name]
    with dynograph.no_grad():
        assert model.eval()(dynograph.randn(1, 3, 64, 64)).shape == (1, 1000)


@pytest.mark.parametrize("name", ["vgg11", "vgg11_bn", "vgg16", "vgg16_bn"])
def test_vgg_parameter_counts(name):
    # init_weights=False only skips the slow re-initialization of 130M numbers.
    model = getattr(models, name)(init_weights=False)
    assert n_params(model) == PARAM_COUNTS[name]
    if name == "vgg11_bn":
        with dynograph.no_grad():
            assert model.eval()(dynograph.randn(1, 3, 32, 32)).shape == (1, 1000)


def test_num_classes():
    assert models.resnet18(num_classes=10).fc.weight.shape == (10, 512)
    assert models.mobilenet_v2(num_classes=7).classifier[1].out_features == 7
    assert models.alexnet(num_classes=5).classifier[6].out_features == 5


def test_state_dict_keys_follow_torchvision():
    resnet = list(models.resnet18().state_dict())
    assert resnet[:6] == ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
                          "bn1.num_batches_tracked"]
    for key in ["layer1.0.conv1.weight", "layer1.1.bn2.running_var", "layer2.0.downsample.0.weight",
                "layer2.0.downsample.1.num_batches_tracked", "layer4.1.conv2.weight", "fc.weight", "fc.bias"]:
        assert key in resnet
    assert "layer1.0.downsample.0.weight" not in resnet    # layer1 keeps 64 channels: no projection
    assert "layer1.0.conv3.weight" in models.resnet50().state_dict()

    mobilenet = models.mobilenet_v2().state_dict()
    for key in ["features.0.0.weight", "features.0.1.running_mean", "features.1.conv.0.0.weight",
                "features.1.conv.1.weight", "features.2.conv.0.0.weight", "features.2.conv.1.0.weight",
                "features.2.conv.2.weight", "features.2.conv.3.running_var", "features.18.0.weight",
                "classifier.1.weight", "classifier.1.bias"]:
        assert key in mobilenet
    assert "features.0.0.bias" not in mobilenet            # a conv before BatchNorm has no bias

    alexnet = list(models.alexnet().state_dict())
    assert alexnet == [f"{part}.{i}.{p}" for part, idx in (("features", (0, 3, 6, 8, 10)),
                                                           ("classifier", (1, 4, 6)))
                       for i in idx for p in ("weight", "bias")]
    vgg = list(models.vgg11_bn(init_weights=False).state_dict())
    assert vgg[:7] == ["features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias",
                       "features.1.running_mean", "features.1.running_var", "features.1.num_batches_tracked"]
    assert vgg[-6:] == [f"classifier.{i}.{p}" for i in (0, 3, 6) for p in ("weight", "bias")]


@pytest.mark.parametrize("name, size", [("resnet18", 64), ("resnet50", 64), ("mobilenet_v2", 64),
                                        ("lenet", 32)])
def test_same_outputs_as_torch(name, size):
    ref = _randomized(TORCH_REFERENCES[name]())
    model = getattr(models, name)()
    assert list(model.state_dict()) == list(ref.state_dict())
    for key, value in model.state_dict().items():
        assert tuple(value.shape) == tuple(ref.state_dict()[key].shape), key
    model.load_state_dict(_to_dynograph(ref.state_dict()))
    _check_same_output(ref, model, size)


def test_width_mult_matches_torch():
    ref = TorchMobileNetV2(width_mult=0.5)
    model = models.mobilenet_v2(width_mult=0.5)
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert n_params(models.mobilenet_v2(width_mult=0.5, round_nearest=4)) != n_params(model)


def test_torch_saved_state_dict_loads_with_dynograph_load(tmp_path):
    ref = _randomized(TorchResNet(TorchBasicBlock, [2, 2, 2, 2], num_classes=10))
    path = tmp_path / "resnet18.pth"
    torch.save(ref.state_dict(), path)
    model = models.resnet18(num_classes=10)
    model.load_state_dict(dynograph.load(path))
    _check_same_output(ref, model, 64)


def test_weights_are_refused_with_a_way_forward():
    with pytest.raises(ValueError, match="cannot be downloaded") as info:
        models.resnet18(weights="IMAGENET1K_V1")
    assert "dynograph.load" in str(info.value) and "load_state_dict" in str(info.value)
    with pytest.raises(ValueError, match="cannot be downloaded"):
        models.mobilenet_v2(pretrained=True)
    assert models.lenet(pretrained=False).fc3.out_features == 10


def test_resnet_initialization():
    model = models.resnet18(zero_init_residual=True)
    w = model.layer3[0].conv1.weight
    fan_out = w.shape[0] * w.shape[2] * w.shape[3]
    assert abs(w.std().item() - (2.0 / fan_out) ** 0.5) < 0.1 * (2.0 / fan_out) ** 0.5
    assert (model.bn1.weight == 1).all() and (model.bn1.bias == 0).all()
    assert (model.layer1[0].bn2.weight == 0).all() and (model.layer1[0].bn1.weight == 1).all()
    assert (models.resnet18().layer1[0].bn2.weight == 1).all()
    assert (models.resnet50(zero_init_residual=True).layer1[0].bn3.weight == 0).all()


def test_lenet_tutorial_shapes():
    assert n_params(models.LeNet()) == 62_006
    assert models.LeNet(in_channels=1)(dynograph.randn(1, 1, 32, 32)).shape == (1, 10)


def test_models_is_a_lazy_submodule_of_vision():
    import dynograph.vision as vision
    assert "models" in dir(vision) and vision.models is models
