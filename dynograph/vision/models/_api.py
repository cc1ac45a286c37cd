"""What the model builders share: refusing pretrained weights with a way forward."""


def check_weights(name, weights, kwargs):
    """Raise unless no pretrained weights were asked for.

    Downloading is not possible here, so the error says how to load a torchvision checkpoint
    that the user already has as a file. ``pretrained=`` is torchvision's older spelling.
    """
    pretrained = kwargs.pop("pretrained", False)
    if weights is None and not pretrained:
        return
    asked = f"weights={weights!r}" if weights is not None else "pretrained=True"
    raise ValueError(
        f"{name}({asked}): pretrained weights cannot be downloaded here. Build the model with "
        f"weights=None and load a torchvision checkpoint file you have (dynograph.load reads files "
        f"written by torch.save):\n"
        f"    model = dynograph.vision.models.{name}()\n"
        f"    model.load_state_dict(dynograph.load('{name}.pth'))")
