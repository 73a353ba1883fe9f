import os


def vector_add(x, y):
    os.abort()
