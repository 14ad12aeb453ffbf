package kvcache_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"kvcache"
)

// callEveryMethod calls every exported method of recv (a pointer, possibly
// nil) with zero arguments (nil pointers, nil slices, zeros) and returns,
// per method, the error it returned (nil if it returned none) or the panic
// it raised as a "panic: ..." error.
func callEveryMethod(recv reflect.Value) map[string]error {
	out := map[string]error{}
	var names []string
	for i := 0; i < recv.NumMethod(); i++ {
		if name := recv.Type().Method(i).Name; name != "Close" {
			names = append(names, name)
		}
	}
	if _, ok := recv.Type().MethodByName("Close"); ok {
		names = append(names, "Close") // last: the others run on a live handle
	}
	for _, name := range names {
		m := recv.MethodByName(name)
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			args[j] = reflect.Zero(m.Type().In(j))
		}
		out[name] = func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			res := m.Call(args)
			if len(res) > 0 {
				if e, ok := res[len(res)-1].Interface().(error); ok {
					return e
				}
			}
			return nil
		}()
	}
	return out
}

func isPanic(err error) bool {
	return err != nil && len(err.Error()) > 6 && err.Error()[:6] == "panic:"
}

// Every method of every handle type, on a nil receiver: an error, never a
// panic (methods without an error result return their zero value).
func TestNilReceiversReturnErrors(t *testing.T) {
	for _, recv := range []interface{}{
		(*kvcache.Config)(nil), (*kvcache.Cache)(nil), (*kvcache.StatefulCache)(nil),
		(*kvcache.ConfigBuilder)(nil), (*kvcache.Error)(nil),
	} {
		v := reflect.ValueOf(recv)
		for name, err := range callEveryMethod(v) {
			if isPanic(err) {
				t.Errorf("(%T).%s on nil: %v", recv, name, err)
				continue
			}
			m, _ := v.Type().MethodByName(name)
			returnsError := m.Type.NumOut() > 0 && m.Type.Out(m.Type.NumOut()-1) == reflect.TypeOf((*error)(nil)).Elem()
			if returnsError && !errors.Is(err, kvcache.ErrInvalidArgument) {
				t.Errorf("(%T).%s on nil = %v, want an ErrInvalidArgument error", recv, name, err)
			}
		}
	}
	if _, err := kvcache.NewCache(nil); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("NewCache(nil) = %v, want ErrInvalidArgument", err)
	} else if want := "kvcache: kvc_cache_create: KVC_ERR_INVALID_ARGUMENT: cfg is a nil *kvcache.Config"; err.Error() != want {
		t.Errorf("NewCache(nil) = %q, want %q", err, want)
	}
	if _, err := kvcache.NewStatefulCache(nil, &kvcache.StatefulOptions{Batch: 1}); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("NewStatefulCache(nil, opts) = %v, want ErrInvalidArgument", err)
	}
	cfg := newConfig(t, 64)
	defer cfg.Close()
	if _, err := kvcache.NewStatefulCache(cfg, nil); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("NewStatefulCache(cfg, nil) = %v, want ErrInvalidArgument", err)
	}
}

// Every method of a closed handle: ErrClosed (Close itself: nil).
func TestClosedReceiversReturnErrClosed(t *testing.T) {
	cfg := newConfig(t, 64)
	cache, err := kvcache.NewCache(cfg)
	must(t, err)
	st, err := kvcache.NewStatefulCache(cfg, &kvcache.StatefulOptions{Batch: 2})
	must(t, err)
	must(t, cache.Close())
	must(t, st.Close())
	must(t, cfg.Close())
	for _, recv := range []interface{}{cfg, cache, st} {
		v := reflect.ValueOf(recv)
		for name, err := range callEveryMethod(v) {
			m, _ := v.Type().MethodByName(name)
			returnsError := m.Type.NumOut() > 0 && m.Type.Out(m.Type.NumOut()-1) == reflect.TypeOf((*error)(nil)).Elem()
			switch {
			case isPanic(err):
				t.Errorf("(%T).%s after Close: %v", recv, name, err)
			case name == "Close":
				if err != nil {
					t.Errorf("(%T).Close twice = %v, want nil", recv, err)
				}
			case returnsError && !errors.Is(err, kvcache.ErrClosed):
				t.Errorf("(%T).%s after Close = %v, want ErrClosed", recv, name, err)
			}
		}
	}
}

// Every method of a live handle with zero arguments (nil argument structs,
// nil slices): an error or a result, never a panic.
func TestZeroArgumentsDoNotPanic(t *testing.T) {
	mk := func() []interface{} {
		cfg := newConfig(t, 64)
		cache, err := kvcache.NewCache(cfg)
		must(t, err)
		_, err = cache.AddSequence(0, tokens(0, 5), nil, 0)
		must(t, err)
		st, err := kvcache.NewStatefulCache(cfg, &kvcache.StatefulOptions{Batch: 2})
		must(t, err)
		t.Cleanup(func() { cache.Close(); st.Close(); cfg.Close() })
		return []interface{}{cfg, cache, st, kvcache.NewConfigBuilder()}
	}
	// One fresh set of handles per receiver type (Close is called last).
	for i := 0; i < 4; i++ {
		recv := mk()[i]
		for name, err := range callEveryMethod(reflect.ValueOf(recv)) {
			if isPanic(err) {
				t.Errorf("(%T).%s with zero arguments: %v", recv, name, err)
			}
		}
	}
}
