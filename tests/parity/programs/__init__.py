"""Programs written against PyTorch's API, each a function of the framework module it runs on, so the parity
suite runs one source on PyTorch and on verigrad."""
