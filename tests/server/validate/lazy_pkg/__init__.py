"""A stand-in third-party package whose `__init__` does not import its submodule `nested`: a helper
entry `{"module_path": "lazy_pkg", "attr_name": "nested.Outer.Inner.plain"}` must import it itself."""
