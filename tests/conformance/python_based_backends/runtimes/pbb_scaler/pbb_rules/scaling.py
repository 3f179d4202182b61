import numpy as np


def scale(x, factor, offset):
    return (x * np.float32(factor) + np.float32(offset)).astype(np.float32)
