package config

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantCode  string // "" = success
		wantField string
	}{
		{name: "valid document", body: `{"frontends":[{"name":"a","binds":[{"name":"b","address":"*","port":80}]}]}`},
		{name: "white space around the document", body: " \n{}\n\t "},
		{name: "null member accepted", body: `{"frontends":null}`},
		{name: "empty body", body: "", wantCode: DecodeEmpty},
		{name: "white space only", body: "  \n", wantCode: DecodeEmpty},
		{name: "syntax error", body: `{"frontends":[}`, wantCode: DecodeSyntax},
		{name: "truncated document", body: `{"frontends":[{"name":"a"`, wantCode: DecodeSyntax},
		{name: "trailing object", body: `{}{}`, wantCode: DecodeTrailing},
		{name: "trailing garbage", body: `{} x`, wantCode: DecodeTrailing},
		{name: "invalid UTF-8 in a string", body: "{\"frontends\":[{\"name\":\"a\xff\"}]}", wantCode: DecodeUTF8},
		{name: "nesting 33 deep", body: strings.Repeat("[", 33) + strings.Repeat("]", 33), wantCode: DecodeDepth},
		{name: "brackets inside strings do not count", body: `{"frontends":[{"name":"` + strings.Repeat("[", 100) + `"}]}`},
		{name: "escaped quote inside a string", body: `{"frontends":[{"name":"a\"[[[["}]}`},
		{name: "unknown top-level field", body: `{"frontend":[]}`, wantCode: DecodeUnknownField, wantField: "/frontend"},
		{name: "unknown nested field", body: `{"backends":[{"name":"w"},{"name":"x","servers":[{"name":"s","adress":"x"}]}]}`,
			wantCode: DecodeUnknownField, wantField: "/backends/1/servers/0/adress"},
		{name: "field name with other case is unknown", body: `{"backends":[{"Name":"w"}]}`,
			wantCode: DecodeUnknownField, wantField: "/backends/0/Name"},
		{name: "pointer escaping of member names", body: `{"a/b~c":1}`, wantCode: DecodeUnknownField, wantField: "/a~1b~0c"},
		{name: "string for an integer", body: `{"tuning":{"nbthread":"2"}}`, wantCode: DecodeType, wantField: "/tuning/nbthread"},
		{name: "fraction for an integer", body: `{"tuning":{"nbthread":1.5}}`, wantCode: DecodeType, wantField: "/tuning/nbthread"},
		{name: "integer overflow", body: `{"tuning":{"maxconn":99999999999999999999}}`, wantCode: DecodeType, wantField: "/tuning/maxconn"},
		{name: "object for an array", body: `{"frontends":{}}`, wantCode: DecodeType, wantField: "/frontends"},
		{name: "number for a string", body: `{"frontends":[{"name":1}]}`, wantCode: DecodeType, wantField: "/frontends/0/name"},
		{name: "string for a boolean", body: `{"frontends":[{"name":"a","http":{"via":"yes"}}]}`, wantCode: DecodeType, wantField: "/frontends/0/http/via"},
		{name: "array for the document", body: `[]`, wantCode: DecodeType, wantField: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			err := Decode(strings.NewReader(tt.body), &c)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("Decode() = %v, want success", err)
				}
				return
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode() = %v (%T), want *DecodeError %s", err, err, tt.wantCode)
			}
			if de.Code != tt.wantCode || de.Field != tt.wantField {
				t.Fatalf("Decode() = {field %q code %q: %s}, want field %q code %q", de.Field, de.Code, de.Message, tt.wantField, tt.wantCode)
			}
			if de.Message == "" {
				t.Fatal("empty message")
			}
			malformed := tt.wantCode != DecodeUnknownField && tt.wantCode != DecodeType
			if de.Malformed() != malformed {
				t.Fatalf("Malformed() = %v, want %v", de.Malformed(), malformed)
			}
		})
	}
}

func TestDecodeDepthLimitIsInclusive(t *testing.T) {
	var v any
	if err := Decode(strings.NewReader(strings.Repeat("[", 32)+strings.Repeat("]", 32)), &v); err != nil {
		t.Fatalf("32 levels refused: %v", err)
	}
}

func TestDecodeIntoMapAndAny(t *testing.T) {
	var m map[string]any
	if err := Decode(strings.NewReader(`{"weight":null,"x":{"y":[1,2]}}`), &m); err != nil {
		t.Fatalf("merge patch decode: %v", err)
	}
	if _, ok := m["weight"]; !ok || m["weight"] != nil {
		t.Fatalf("null member lost: %v", m)
	}
	var s struct {
		When time.Time `json:"when"`
	}
	if err := Decode(strings.NewReader(`{"when":"2024-01-02T03:04:05Z"}`), &s); err != nil || s.When.Year() != 2024 {
		t.Fatalf("time decode: %v %v", err, s.When)
	}
	var de *DecodeError
	if err := Decode(strings.NewReader(`{"when":"yesterday"}`), &s); !errors.As(err, &de) {
		t.Fatalf("bad time: %v", err)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestDecodeReturnsReaderErrorsWrapped(t *testing.T) {
	sentinel := errors.New("body too large")
	var c Config
	err := Decode(io.MultiReader(strings.NewReader("{"), failingReader{sentinel}), &c)
	var de *DecodeError
	if !errors.Is(err, sentinel) || errors.As(err, &de) {
		t.Fatalf("Decode() = %v, want the reader's error, not a DecodeError", err)
	}
}

func TestDecodeRejectsNonPointer(t *testing.T) {
	if err := Decode(strings.NewReader("{}"), Config{}); err == nil {
		t.Fatal("Decode into a non-pointer succeeded")
	}
}
