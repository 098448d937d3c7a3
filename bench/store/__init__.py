"""How results are kept: the record format and atomic writes. The ground floor: it imports
nothing of the harness but its errors, so that everything above may use it."""
