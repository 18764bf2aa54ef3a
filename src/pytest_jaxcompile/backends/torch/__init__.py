"""The torch backend: ``torch.compile`` frames from torch's own compilation metrics."""
