"""The kinds of an option, named the way the errors name them.

An error that lists the choices of an argument (`cx.Baumgarte(...) or cx.Projection(...)`)
reads them off the class hierarchy, so that a new kind (a subclass of the abstract base)
appears in every message without an edit to it.
"""


def _public_path(cls: type) -> str:
    """`cx.Name`, or `cx.sub.Name` for a class of a subpackage (private modules dropped)."""
    parts = [part for part in cls.__module__.split(".")[1:] if not part.startswith("_")]
    return ".".join(["cx", *parts, cls.__name__])


def kinds(base: type, call: str = "") -> str:
    """The concrete subclasses of `base` that constrax defines, in alphabetical order, as
    `"cx.A, cx.B or cx.C"`, each name followed by `call` (`"()"`, `"(...)"`).

    Concrete means public and not `Abstract*`; subclasses defined outside constrax (a
    user's, a test's) are not listed.
    """
    found, todo = set(), [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.split(".")[0] == "constrax" and not sub.__name__.startswith(
                ("_", "Abstract")
            ):
                found.add(sub)
    names = sorted((_public_path(cls) + call for cls in found), key=lambda s: s.split(".")[-1])
    if len(names) < 2:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]
