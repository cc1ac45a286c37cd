"""dynograph.nn.utils: gradient clipping, parameter/vector conversion and recurrent-sequence helpers."""
