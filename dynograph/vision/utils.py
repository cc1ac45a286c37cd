"""Image grids (torchvision.utils.make_grid / save_image)."""
import math
import pathlib

import dynograph as torch


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0):
    """Tile a (B, C, H, W) batch (or a list of CHW images) into one CHW image, ``nrow`` per row.

    One-channel images become three-channel; ``normalize`` maps value_range (default: the min and
    max, of each image with scale_each) to [0, 1].
    """
    if not isinstance(tensor, torch.Tensor):
        if not isinstance(tensor, list):
            raise TypeError(f"tensor or list of tensors expected, got {type(tensor)}")
        for t in tensor:
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"tensor or list of tensors expected, got a list containing {type(t)}")
        tensor = torch.stack(tensor, dim=0)
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        if tensor.size(0) == 1:
            tensor = torch.cat((tensor, tensor, tensor), 0)
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 4 and tensor.size(1) == 1:
        tensor = torch.cat((tensor, tensor, tensor), 1)
    if normalize is True:
        if value_range is not None and not isinstance(value_range, tuple):
            raise TypeError("value_range has to be a tuple (min, max) if specified. min and max are numbers")
        tensor = tensor.clone()     # normalized in place below
        for t in (tensor if scale_each else [tensor]):
            low, high = value_range if value_range is not None else (float(t.min()), float(t.max()))
            t.clamp_(min=low, max=high).sub_(low).div_(max(high - low, 1e-5))
    if tensor.size(0) == 1:
        return tensor.squeeze(0)
    nmaps = tensor.size(0)
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(tensor.size(2) + padding), int(tensor.size(3) + padding)
    grid = tensor.new_full((tensor.size(1), height * ymaps + padding, width * xmaps + padding), pad_value)
    for k in range(nmaps):
        y, x = divmod(k, xmaps)
        grid.narrow(1, y * height + padding, height - padding).narrow(
            2, x * width + padding, width - padding).copy_(tensor[k])
    return grid


def save_image(tensor, fp, format=None, **kwargs):
    """Save a tensor (or a batch, as make_grid(**kwargs) tiles it) with values in [0, 1] as an image file."""
    from PIL import Image
    grid = make_grid(tensor, **kwargs)
    # + 0.5 rounds to the nearest byte
    ndarr = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to(torch.uint8).numpy()
    im = Image.fromarray(ndarr)
    im.save(str(fp) if isinstance(fp, pathlib.PurePath) else fp, format=format)
