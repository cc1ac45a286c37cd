"""dynograph.vision.models: torchvision's architectures, with its constructors and state_dict keys.

A state_dict saved from the torchvision model (``torch.save(model.state_dict(), path)``) loads
with ``model.load_state_dict(dynograph.load(path))``. Pretrained weights are not downloaded:
``weights`` must be None. ``LeNet`` is the small network of the PyTorch tutorials (not in torchvision).
"""
from .alexnet import AlexNet, alexnet
from .lenet import LeNet, lenet
from .mobilenetv2 import InvertedResidual, MobileNetV2, mobilenet_v2
from .resnet import BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50
from .vgg import VGG, vgg11, vgg11_bn, vgg16, vgg16_bn

__all__ = [
    "AlexNet", "alexnet", "LeNet", "lenet", "MobileNetV2", "InvertedResidual", "mobilenet_v2",
    "ResNet", "BasicBlock", "Bottleneck", "resnet18", "resnet34", "resnet50",
    "VGG", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn",
]
