"""Importers: a model from outside the zoo — a HuggingFace ``config.json`` (``hf_config``), a
PyTorch module traced on fake tensors (``torch_import``, needs the ``torch`` extra) or an ONNX
file (``onnx_import``, needs the ``onnx`` extra). Each prices every op with the formula registry
(``_import_common``) and returns a ``Model``; the optional extras load only when used.
"""
