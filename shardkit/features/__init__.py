"""Kinds of features: one class per kind (``images``, ``labels``, ``numbers``, ``text``,
``files``), the interface they share (``base``) and the table that names them (``registry``).
"""
