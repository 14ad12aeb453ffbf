"""The binding covers the whole C API, as the headers declare it:

- every function of include/kvcache/*.h (and version.h) has its prototype
  in _capi.PROTOTYPES, with the same result and parameter types, and is
  called by the package (a `lib.kvc_x` use outside _capi.py), and every
  name of src/kvcache.map is declared;
- every transparent struct is in _capi.STRUCTS with the same members, in
  order, of the same types; every member of an input struct is written by
  the package (output structs are read whole by records.py);
- the enumerations of _types.py have the headers' values.

A function or member added to the headers fails this until it is wrapped.
"""
import ctypes
import os
import re
import unittest

import c_headers
from kvcache import _capi, _types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
PACKAGE = os.path.join(HERE, "..", "kvcache")

# Structs the library reads (the package must set each member) and the
# members with no information to give.
INPUT_STRUCTS = ("kvc_store_args_t", "kvc_store_strides_t", "kvc_decode_args_t",
                 "kvc_sequence_options_t", "kvc_extra_key_t", "kvc_retention_range_t",
                 "kvc_stateful_options_t", "kvc_stateful_append_args_t",
                 "kvc_stateful_decode_args_t", "kvc_prefill_args_t", "kvc_resize_inputs_t",
                 "kvc_kv_resource_t")
NOT_SET = ("struct_size", "reserved")


def package_source(exclude=("_capi.py",)):
    text = []
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py") and name not in exclude:
            with open(os.path.join(PACKAGE, name)) as f:
                text.append(f.read())
    return "\n".join(text)


def squash(ctype):
    return re.sub(r"\s+", "", ctype)


@unittest.skipUnless(os.path.isdir(os.path.join(ROOT, "include", "kvcache")),
                     "not inside the kvcache repository")
class CoverageTest(unittest.TestCase):
    def test_every_function_declared_with_its_prototype(self):
        headers = {name: (ret, params) for name, ret, params in c_headers.functions(ROOT)}
        declared = {name: (ret, params) for name, ret, params in _capi.parse_prototypes()}
        self.assertGreater(len(headers), 90)
        missing = sorted(set(headers) - set(declared))
        self.assertEqual(missing, [], "functions of the headers not in _capi.PROTOTYPES")
        extra = sorted(set(declared) - set(headers))
        self.assertEqual(extra, [], "_capi.PROTOTYPES declares functions the headers do not")
        for name, (ret, params) in headers.items():
            dret, dparams = declared[name]
            self.assertEqual(squash(dret), squash(ret), "result type of " + name)
            self.assertEqual([squash(t) for t, _ in dparams], [squash(t) for t, _ in params],
                             "parameter types of " + name)

    def test_every_exported_symbol_declared(self):
        with open(os.path.join(ROOT, "src", "kvcache.map")) as f:
            exported = set(re.findall(r"^\s*(kvc_\w+);", f.read(), re.M))
        declared = {name for name, _, _ in _capi.parse_prototypes()}
        self.assertEqual(sorted(exported - declared), [])

    def test_every_function_called_by_the_package(self):
        source = package_source()
        unused = [name for name, _, _ in _capi.parse_prototypes()
                  if not re.search(r"\b_?lib\.%s\b" % name, source)]
        self.assertEqual(unused, [], "C functions the package never calls")

    def test_every_function_loaded_with_its_types(self):
        for name, ret, params in _capi.parse_prototypes():
            fn = getattr(_capi.lib, name)
            self.assertTrue(hasattr(fn, "argtypes"), name + " is not exported by the library")
            self.assertEqual(fn.restype, _capi.ctype_of(ret, result=True), name)
            self.assertEqual(fn.argtypes, [_capi.ctype_of(t) for t, _ in params], name)

    def test_every_struct_member_declared(self):
        headers = c_headers.structs(ROOT)
        self.assertEqual(sorted(headers), sorted(_capi.STRUCTS))
        for name, members in headers.items():
            fields = _capi.struct(name)._fields_
            self.assertEqual([f for f, _ in fields], [m for _, m in members], name)
            for (ctype, member), (_, pytype) in zip(members, fields):
                self.assertIs(pytype, _capi.ctype_of(ctype), "%s.%s" % (name, member))

    def test_every_input_member_written(self):
        source = package_source()
        for name in INPUT_STRUCTS:
            for member, _ in _capi.struct(name)._fields_:
                if member in NOT_SET:
                    continue
                written = re.search(r"\.%s\s*=|\.%s,|,\s*\w+\.%s\s*=" % (member, member, member),
                                    source)
                self.assertTrue(written, "%s.%s is never written by the package" % (name, member))

    def test_every_output_struct_read(self):
        from kvcache import records
        read = {r.ctype.__name__ for r in records.RECORDS.values()}
        outputs = set(_capi.STRUCTS) - set(INPUT_STRUCTS)
        self.assertEqual(sorted(outputs - read), [], "output structs without a record")
        for r in records.RECORDS.values():
            self.assertEqual(list(r.fields), [f for f, _ in r.ctype._fields_ if f not in NOT_SET])

    def test_struct_layouts_match_the_library(self):
        # The library writes min(struct_size, its size) bytes and zeroes
        # nothing beyond: a struct declared too small would be caught by
        # the size the init function sets.
        for name in _capi.STRUCTS:
            init = getattr(_capi.lib, name[:-2] + "_init", None)
            if init is None:
                continue
            s = _capi.struct(name)()
            init(ctypes.byref(s))
            self.assertEqual(s.struct_size, ctypes.sizeof(s), name)

    def test_enumerations_match(self):
        constants = c_headers.enum_constants(ROOT)
        enums = {"KVC_ERR_": _types.Status, "KVC_DTYPE_": _types.DType,
                 "KVC_LAYOUT_": _types.Layout, "KVC_DEVICE_": _types.DeviceKind,
                 "KVC_TABLE_": _types.TableFormat, "KVC_FEATURE_": _types.Feature,
                 "KVC_GROWTH_": _types.GrowthPolicy, "KVC_EVENT_": _types.EventKind,
                 "KVC_TIER_": _types.Tier, "KVC_RESOURCE_REASON_": _types.ResourceReason,
                 "KVC_RESOURCE_": _types.ResourceKind, "KVC_SHARE_HANDLE_": _types.ShareHandle}
        for cname, value in constants.items():
            value = eval(value.replace("u", ""))  # "1u << 0"
            if cname == "KVC_OK":
                self.assertEqual(_types.Status.OK, value)
                continue
            if cname == "KVC_DEFAULT_PRIORITY":
                self.assertEqual(_types.DEFAULT_PRIORITY, value)
                continue
            for prefix, enum in enums.items():
                if cname.startswith(prefix):
                    self.assertEqual(enum[cname[len(prefix):]], value, cname)
                    break
            else:
                if cname.startswith("KVC_VERSION") or cname == "KVC_ABI_VERSION":
                    continue
                self.fail("constant %s has no Python counterpart" % cname)

    def test_unsigned_constants_match(self):
        # The #defines with a u suffix or an expression, which
        # enum_constants() leaves out.
        expected = {"KVC_STATEFUL_MAX_BATCH": _types.STATEFUL_MAX_BATCH,
                    "KVC_STATEFUL_MAX_LENGTH": _types.STATEFUL_MAX_LENGTH,
                    "KVC_STATEFUL_ALL_ROWS": _types.ALL_ROWS,
                    "KVC_STATE_MAX_RESOURCES": _types.STATE_MAX_RESOURCES,
                    "KVC_STATE_MAX_ALIGNMENT": _types.STATE_MAX_ALIGNMENT,
                    "KVC_MAX_KV_RESOURCES": _types.MAX_KV_RESOURCES}
        found = {}
        for text in c_headers.header_texts(ROOT).values():
            for name, value in re.findall(r"#define\s+(KVC_\w+)\s+(\(?[0-9xa-fA-F]+u[^\n]*)$",
                                          text, re.M):
                found[name] = eval(re.sub(r"(?<=[0-9a-fA-F])u", "", value))
        self.assertEqual({k: found.get(k) for k in expected}, expected)
        self.assertEqual(sorted(set(found) - set(expected)), [],
                         "unsigned constants with no Python counterpart")


if __name__ == "__main__":
    unittest.main()
