"""The model: backbones, masks, heads, the training loop, inference, losses and efficiency."""
