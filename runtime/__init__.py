"""dynograph.runtime: dtypes, devices and buffers (the lowest layer; imports nothing above it)."""
