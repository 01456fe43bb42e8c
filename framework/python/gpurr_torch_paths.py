"""gpurr's PyTorch layer's module paths (gpurr_torch_layer.py): the name of
every nn.Module a launch runs in, rooted at the class of the outermost
module that holds it, each part the attribute its parent holds it by
(docs/RECORDING.md, "Module paths"). A module first called on its own is
named as a root, and as a bigger module's part once that one runs it; a
module two parents hold is named by the one that calls it."""
import threading
import weakref

module_class = None  # torch.nn.Module, once the layer is installed
on_new_root = lambda: None  # noqa: E731  the layer's: a new root's parameters are the framework's
# module -> its path (bytes, kept alive here; a path replaced by a bigger
# root's stays alive while a thread is inside the module: its stack holds it)
paths = weakref.WeakKeyDictionary()
_named_by = weakref.WeakKeyDictionary()  # module -> a weak reference to the module whose tree named it
_parents = weakref.WeakKeyDictionary()  # module -> (weak reference to its latest parent, its name there)
roots = {}  # id -> weak reference of the modules named as roots: renamed when run as a part of another
_root_names = weakref.WeakValueDictionary()  # a root's path -> the live module that has it
_naming = threading.RLock()


def _tree_names(module):
    """(name, submodule) below `module`, itself first (name ""); torch.compile's
    wrappers list theirs as the modules they wrap do (no `_orig_mod`)."""
    for name, sub in module.named_modules():
        if "_orig_mod" in name:
            name = ".".join(part for part in name.split(".") if part != "_orig_mod")
        yield name, sub


def registered(parent, name, child):
    """The global module registration hook: each module's latest parent."""
    try:
        if isinstance(child, module_class):
            _parents[child] = (weakref.ref(parent), name)
    except Exception:  # noqa: BLE001  a module that cannot be a key (unhashable): it goes without
        pass


def _outermost_holder(module):
    """The outermost module that holds `module` below itself, by the parents
    modules were registered in (a LightningModule holding the generator its
    training_step calls, a CausalLM holding the model called on its own);
    `module` itself when none does."""
    top, seen = module, {id(module)}
    while (link := _parents.get(top)) is not None:
        parent = link[0]()
        if parent is None or id(parent) in seen or getattr(parent, "_modules", {}).get(link[1]) is not top:
            break  # gone, a cycle, or no longer its child there
        seen.add(id(parent))
        top = parent
    return top


def _name_tree(top, path):
    """Names `top` `path` and every module below it from there: those not
    named yet, and those a root below `top` named (a module first called on
    its own, or run as a bigger module's part, takes the bigger one's names)."""
    tree = {id(m) for m in top.modules()}
    named_by = weakref.ref(top)
    for name, sub in _tree_names(top):
        by = _named_by.get(sub)
        by = by() if by is not None else None
        if sub in paths and (by is None or id(by) not in tree):
            continue
        paths[sub] = path + b"." + name.encode() if name else path
        _named_by[sub] = named_by
    if _is_root(top):  # a root no more: its name is free
        del roots[id(top)]
        for name in [n for n, m in list(_root_names.items()) if m is top]:
            _root_names.pop(name, None)


def _is_root(module):
    root = roots.get(id(module))
    return root is not None and root() is module


def _root_path(module):
    """A new root's path: its class, `#2`, `#3`... after it while another
    module of that name is alive and a root."""
    inner = getattr(module, "_orig_mod", module)  # torch.compile's wrapper: the module it wraps
    name = type(inner).__name__
    path, n = name, 1
    if getattr(module, "_is_replica", False):
        return path.encode()  # DataParallel's, made anew at each call: the module it copies
    while _root_names.get(path) not in (None, module, inner):
        n += 1
        path = f"{name}#{n}"
    _root_names[path] = module
    return path.encode()


def path_of(module, stack):
    """The module's path, rooted at the class of the outermost module that
    holds it (docs/RECORDING.md, "Module paths")."""
    root = roots.get(id(module)) if stack else None
    if root is not None and root() is module:
        # Named as a root, now run inside a module that holds it as a child:
        # named as that one's part from now on.
        with _naming:
            _name_as_child(module, stack)
    path = paths.get(module)
    if path is not None:
        return path
    with _naming:  # threads name modules one at a time
        path = paths.get(module)
        if path is not None:
            return path
        if not stack:
            # The outermost module running, or the outermost one holding it,
            # names itself and every module below it.
            top = _outermost_holder(module)
            _name_tree(top, _root_path(top))
            roots[id(top)] = weakref.ref(top)
            on_new_root()
            return paths[module]
        # Called inside another module: its part (a child set after the
        # module was named), or else a module of its own there.
        if _name_as_child(module, stack):
            return paths[module]
        path = stack[-1][1] + b"." + type(module).__name__.encode()
        paths[module] = path
        return path


def _name_as_child(module, stack):
    """Names `module` and those below it as the child of the innermost module
    running that it is; False when it is none of its children."""
    parent, parent_path = stack[-1]
    for attribute, child in getattr(parent, "_modules", {}).items():
        if child is module:
            _name_tree(module, parent_path + b"." + attribute.encode())
            return True
    return False


def call_path(module, stack):
    """`module`'s path in a call inside the modules of `stack`."""
    path = path_of(module, stack)
    return _as_called(module, path, stack[-1]) if stack else path


def _as_called(module, path, caller):
    """`module`'s path in this call, inside `caller` (module, path): its own,
    unless that is not below the caller's and the caller holds it as a child,
    which names it (a module shared by two parents: T5's and BART's
    embedding, held by the model, its encoder and its decoder, is the
    encoder's or the decoder's as either calls it; its own modules too)."""
    parent, parent_path = caller
    if path.startswith(parent_path) and path[len(parent_path):len(parent_path) + 1] == b".":
        return path
    for attribute, child in getattr(parent, "_modules", {}).items():
        if child is module:
            return parent_path + b"." + attribute.encode()
    return path
