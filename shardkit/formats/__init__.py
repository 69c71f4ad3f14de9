"""Bytes on disk, with no TensorFlow: TFRecord framing and its CRC walk, the ``tf.train.Example``
wire format, image probing/decoding/encoding, ``.idx`` sidecars and TFDS metadata.

Both sides use these: the build writes with them, the checkers and readers read with them.
"""
