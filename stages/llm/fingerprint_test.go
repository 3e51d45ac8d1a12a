package llm

import (
	"reflect"
	"testing"
)

// TestFingerprintDecisions fails when a field is added to Config or
// EmbedderConfig without a decision whether it changes answers, and when a
// field's decision and the fingerprint disagree: setting a field that
// changes answers must change the fingerprint, setting any other must not.
func TestFingerprintDecisions(t *testing.T) {
	t.Run("Config", func(t *testing.T) {
		checkFingerprint(t, Config{}, fingerprintFields, func(v any) string { return v.(Config).Fingerprint() })
	})
	t.Run("EmbedderConfig", func(t *testing.T) {
		checkFingerprint(t, EmbedderConfig{}, embedderFingerprintFields, func(v any) string { return v.(EmbedderConfig).Fingerprint() })
	})
}

func checkFingerprint(t *testing.T, zero any, decided map[string]bool, fingerprint func(any) string) {
	t.Helper()
	typ := reflect.TypeOf(zero)
	base := fingerprint(zero)
	fields := map[string]bool{}
	for f := range typ.Fields() {
		fields[f.Name] = true
		changes, ok := decided[f.Name]
		if !ok {
			t.Errorf("%s.%s has no decision: add it to the fingerprint fields (true if it changes answers, and then to Fingerprint)", typ.Name(), f.Name)
			continue
		}
		v := reflect.New(typ).Elem()
		setNonZero(t, v.FieldByIndex(f.Index))
		got := fingerprint(v.Interface())
		switch {
		case changes && got == base:
			t.Errorf("%s.%s changes answers but not the fingerprint", typ.Name(), f.Name)
		case !changes && got != base:
			t.Errorf("%s.%s is decided not to change answers but changes the fingerprint", typ.Name(), f.Name)
		}
	}
	for name := range decided {
		if !fields[name] {
			t.Errorf("decision for %s.%s, which is no field", typ.Name(), name)
		}
	}
}

// setNonZero gives v a value other than its zero value.
func setNonZero(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		setNonZero(t, p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		setNonZero(t, s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		setNonZero(t, k)
		e := reflect.New(v.Type().Elem()).Elem()
		if e.Kind() == reflect.Interface {
			e.Set(reflect.ValueOf("x"))
		} else {
			setNonZero(t, e)
		}
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setNonZero(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("no non-zero value for kind %s", v.Kind())
	}
}
