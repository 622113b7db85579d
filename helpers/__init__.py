"""Engine Playbook helpers: all the logic behind the notebooks in ``playbook/``.

One module per concern. Nothing happens on import; paths derive from ``__file__``.
"""

__version__ = "0.1.0"
