def vector_add(x, y)
    return x
