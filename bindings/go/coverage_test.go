package kvcache_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// These tests keep the binding complete as the C API grows. They read the
// repository around the module and skip when it is not there.

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if os.IsNotExist(err) {
		t.Skipf("%s not found: not inside the kvcache repository", rel)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readHere(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cgoPreamble is the C code in the comment before `import "C"` of a file
// of package kvcache.
func cgoPreamble(t *testing.T, name string) string {
	t.Helper()
	src := readHere(t, name)
	end := strings.Index(src, "*/\nimport \"C\"")
	start := strings.LastIndex(src[:max(end, 0)], "/*")
	if end < 0 || start < 0 {
		t.Fatalf("%s has no cgo preamble", name)
	}
	return src[start:end]
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// exportedSymbols lists the functions of src/kvcache.map, the library's
// whole exported ABI.
func exportedSymbols(t *testing.T) []string {
	m := readRepoFile(t, "src/kvcache.map")
	var syms []string
	for _, match := range regexp.MustCompile(`(?m)^\s*(kvc_\w+);`).FindAllStringSubmatch(m, -1) {
		syms = append(syms, match[1])
	}
	if len(syms) == 0 {
		t.Fatal("no kvc_ symbol in src/kvcache.map")
	}
	sort.Strings(syms)
	return syms
}

// Every header the umbrella header includes is %included by kvcache.i.
func TestHeadersCovered(t *testing.T) {
	umbrella := readRepoFile(t, "include/kvcache/kvcache.h")
	iface := readHere(t, "kvcache.i")
	headers := regexp.MustCompile(`#include "(kvcache/\w+\.h)"`).FindAllStringSubmatch(umbrella, -1)
	if len(headers) == 0 {
		t.Fatal("no header in kvcache.h")
	}
	for _, h := range headers {
		if !strings.Contains(iface, `%include "`+h[1]+`"`) {
			t.Errorf("kvcache.i does not %%include %q (included by kvcache.h)", h[1])
		}
	}
}

// Every exported C function has a SWIG wrapper, and the idiomatic package
// calls it. Exceptions are explained.
func TestWholeCAPIWrapped(t *testing.T) {
	generated := readHere(t, filepath.Join("kvc", "kvc.go"))
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var idiomatic strings.Builder
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			idiomatic.WriteString(readHere(t, f))
		}
	}
	cHelpers := cgoPreamble(t, "results.go")
	notGenerated := map[string]string{
		"kvc_last_error_message": "thread-local: every error carries the message read in the failing call",
	}
	calledThrough := map[string]string{
		"kvc_last_error_message":       "kvcgo_capture (kvcache.i) reads it inside every failing call",
		"kvc_cache_get_async_error":    "kvcgo_cache_async_error (kvcache.i) captures the message of the report",
		"kvc_stateful_get_async_error": "kvcgo_stateful_async_error (kvcache.i) captures the message of the report",
	}
	for _, sym := range exportedSymbols(t) {
		goName := "Kvc_" + strings.TrimPrefix(sym, "kvc_")
		if _, ok := notGenerated[sym]; !ok && !strings.Contains(generated, "func "+goName+"(") {
			t.Errorf("%s has no SWIG wrapper %s in kvc/kvc.go: regenerate (regenerate.sh) or %%include its header", sym, goName)
		}
		if _, ok := calledThrough[sym]; !ok && !strings.Contains(idiomatic.String(), "kvc."+goName+"(") &&
			!strings.Contains(cHelpers, sym+"(") {
			t.Errorf("%s is not used by package kvcache (no kvc.%s call, no call in the C helpers of results.go)", sym, goName)
		}
	}
}

// Struct setters must not take Go pointers: the structs live in C memory,
// where cgo forbids storing Go pointers. A new pointer member needs a
// KVCGO_ADDRESS_MEMBER line in kvcache.i.
func TestStructSettersTakeNoGoPointer(t *testing.T) {
	generated := readHere(t, filepath.Join("kvc", "kvc.go"))
	re := regexp.MustCompile(`func \(arg1 Swigcptr\w+\) (Set\w+)\(arg2 \*`)
	for _, m := range re.FindAllStringSubmatch(generated, -1) {
		t.Errorf("struct setter %s takes a Go pointer", m[1])
	}
}

// Every member of every transparent struct reaches package kvcache: an
// output struct's members are read (GetX), an input struct's are written
// (SetX). struct_size is set by the kvc_x_init functions; reserved members
// carry nothing.
func TestEveryStructMemberUsed(t *testing.T) {
	generated := readHere(t, filepath.Join("kvc", "kvc.go"))
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var idiomatic strings.Builder
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			idiomatic.WriteString(readHere(t, f))
		}
	}
	iface := readHere(t, "kvcache.i")
	// Arrays the library writes into C memory, copied to Go by one call.
	arrayReaders := map[string]string{
		"Kvc_event_t":          "kvcgo_events_read",
		"Kvc_snapshot_entry_t": "kvcgo_snapshot_read",
	}
	for _, reader := range arrayReaders {
		goName := "Kvcgo_" + strings.TrimPrefix(reader, "kvcgo_")
		if !strings.Contains(idiomatic.String(), "kvc."+goName+"(") {
			t.Errorf("%s (kvcache.i) is not called by package kvcache", reader)
		}
	}
	members := regexp.MustCompile(`func \(arg1 Swigcptr(Kvc_\w+)\) Get(\w+)\(\)`).FindAllStringSubmatch(generated, -1)
	if len(members) == 0 {
		t.Fatal("no struct member in kvc/kvc.go")
	}
	for _, m := range members {
		structName, member := m[1], m[2]
		if member == "Struct_size" || member == "Reserved" {
			continue
		}
		if structName == "Kvc_extra_key_t" || structName == "Kvc_retention_range_t" {
			// An array element: written whole by kvcgo_extra_key_set
			// (kvcache.i), checked below.
			continue
		}
		if reader, ok := arrayReaders[structName]; ok {
			// An array element read whole by a kvcache.i helper: it must
			// copy this member (e->member), and package kvcache must call it.
			body := regexp.MustCompile(`(?s)static void ` + reader + `\(.*?\n}`).FindString(iface)
			if body == "" {
				t.Errorf("kvcache.i has no helper %s", reader)
			} else if !strings.Contains(body, "e->"+strings.ToLower(member)+";") {
				t.Errorf("%s member %s is not copied by %s (kvcache.i)", structName, strings.ToLower(member), reader)
			}
			continue
		}
		// results.go reads a struct returned by a C helper as r.v.member.
		if !strings.Contains(idiomatic.String(), ".Get"+member+"()") && !strings.Contains(idiomatic.String(), ".Set"+member+"(") &&
			!strings.Contains(idiomatic.String(), "r.v."+strings.ToLower(member)+")") {
			t.Errorf("%s member %s is neither read nor written by package kvcache", structName, strings.ToLower(member))
		}
	}
	// kvc_extra_key_t: kvcgo_extra_key_set takes the array, the index and
	// one argument per member.
	keyMembers := len(regexp.MustCompile(`func \(arg1 SwigcptrKvc_extra_key_t\) Get`).FindAllString(generated, -1))
	set := regexp.MustCompile(`func Kvcgo_extra_key_set\(([^)]*)\)`).FindStringSubmatch(generated)
	if set == nil || strings.Count(set[1], ",")+1 != 2+keyMembers {
		t.Errorf("kvcgo_extra_key_set does not take every member of kvc_extra_key_t (%d members): %v", keyMembers, set)
	}
	// kvc_retention_range_t: the same, less its reserved member.
	rangeMembers := len(regexp.MustCompile(`func \(arg1 SwigcptrKvc_retention_range_t\) Get`).FindAllString(generated, -1))
	rset := regexp.MustCompile(`func Kvcgo_retention_range_set\(([^)]*)\)`).FindStringSubmatch(generated)
	if rset == nil || strings.Count(rset[1], ",")+1 != 2+rangeMembers-1 {
		t.Errorf("kvcgo_retention_range_set does not take every member of kvc_retention_range_t (%d members): %v", rangeMembers, rset)
	}
}
