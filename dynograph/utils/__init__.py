"""dynograph.utils: data loading (dynograph.utils.data) and other helpers."""
