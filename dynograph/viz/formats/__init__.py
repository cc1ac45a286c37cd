"""One module per output format of ``dynograph.viz.render``."""
