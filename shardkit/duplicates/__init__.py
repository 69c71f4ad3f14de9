"""Duplicates and leaks between splits: a perceptual hash and a digest per record, the groups of
twins among a million records without anything pairwise, and what ``--duplicates drop`` removes.

It needs nothing of shardkit's own: NumPy, Pillow and scipy's DCT (imagehash's), so the build's
workers and any later reader of hashes can use it alike.
"""
