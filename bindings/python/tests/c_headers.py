"""A small parser of kvcache's public C headers, enough for the coverage
test: the exported functions (return type, parameter types) and the
transparent structs (member types and names, in order). It relies on the
house style of the headers (C_API_STYLE.md): every function is declared
`KVC_API <type> <name>(<params>);`, every struct `typedef struct kvc_x {
<type> <name>; ... } kvc_x_t;` with one member per declaration."""
import os
import re

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_FUNCTION = re.compile(r"KVC_API\s+([\w\s\*]+?)\s*\b(kvc_\w+)\s*\(([^)]*)\)\s*;", re.S)
_STRUCT = re.compile(r"typedef\s+struct\s+(kvc_\w+)\s*\{(.*?)\}\s*(kvc_\w+_t)\s*;", re.S)
_MEMBER = re.compile(r"^\s*([\w\s\*]+?)\s*\b(\w+)\s*;\s*$")


def _norm(ctype):
    """'const  kvc_cache_t *' -> 'const kvc_cache_t *'."""
    ctype = re.sub(r"\s*\*\s*", " *", ctype.strip())
    return re.sub(r"\s+", " ", ctype).replace(" *", "*").replace("*", " *").strip()


def _split_param(param):
    param = param.strip()
    if param in ("void", ""):
        return None
    m = re.match(r"^(.*?[\s\*])(\w+)$", param)
    if m is None:
        raise ValueError("cannot parse parameter %r" % param)
    return _norm(m.group(1)), m.group(2)


def header_texts(root):
    """{file name: text without comments} of include/kvcache/*.h and the
    version.h template (cmake/version.h.in)."""
    texts = {}
    inc = os.path.join(root, "include", "kvcache")
    for name in sorted(os.listdir(inc)):
        if name.endswith(".h"):
            with open(os.path.join(inc, name)) as f:
                texts[name] = _COMMENT.sub(" ", f.read())
    with open(os.path.join(root, "cmake", "version.h.in")) as f:
        texts["version.h"] = _COMMENT.sub(" ", f.read())
    return texts


def functions(root):
    """[(name, return type, [(param type, param name)])] in header order."""
    out = []
    for text in header_texts(root).values():
        for ret, name, params in _FUNCTION.findall(text):
            ps = [p for p in (_split_param(x) for x in params.split(",")) if p is not None]
            out.append((name, _norm(ret), ps))
    return out


def structs(root):
    """{typedef name: [(member type, member name)]}."""
    out = {}
    for text in header_texts(root).values():
        for _, body, name in _STRUCT.findall(text):
            members = []
            for decl in body.split(";"):
                decl = decl.strip()
                if not decl:
                    continue
                m = _MEMBER.match(decl + ";")
                if m is None:
                    raise ValueError("cannot parse member %r of %s" % (decl, name))
                members.append((_norm(m.group(1)), m.group(2)))
            out[name] = members
    return out


def enum_constants(root):
    """{KVC_NAME: value} of the enumerators and integer #defines."""
    out = {}
    for text in header_texts(root).values():
        for body in re.findall(r"enum\s+\w+\s*\{(.*?)\}", text, re.S):
            for name, value in re.findall(r"(KVC_\w+)\s*=\s*([^,\n]+)", body):
                out[name] = value.strip()
        for name, value in re.findall(r"#define\s+(KVC_\w+)\s+(\d+)\s*$", text, re.M):
            out[name] = value
    return out
