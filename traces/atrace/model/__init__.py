"""The trace model: the columnar event table, how it is built, what its events are (kinds),
how they nest and which runtime call launched which device work."""
