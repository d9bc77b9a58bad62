"""SketchFuse's Python front end.

``sketchfuse.torch`` is the PyTorch DDP communication hook; its native core is
``libsketchfuse_c.so`` (``bash scripts/build_python.sh`` puts it in
``sketchfuse/_native/``; ``SKETCHFUSE_LIB`` names another copy).
"""
