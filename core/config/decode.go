package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Decode accepts. The
// deepest legitimate document (config → frontends → bind → threads) needs 5;
// 32 leaves room for JSON merge patches and bounds the work a hostile body
// can cause.
const MaxDepth = 32

// Codes of DecodeError. The first five mean the body is not a well-formed
// JSON document (the API answers 400); unknown_field and type mean it is JSON
// that does not fit the schema (the API chooses 400 or 422, see Malformed).
const (
	DecodeEmpty        = "empty"
	DecodeSyntax       = "syntax"
	DecodeUTF8         = "utf8"
	DecodeDepth        = "depth"
	DecodeTrailing     = "trailing_data"
	DecodeUnknownField = "unknown_field"
	DecodeType         = "type"
)

// DecodeError is a body Decode refused. Field is a JSON pointer to the
// offending member when known ("/backends/0/servers/1/weight"), "" otherwise.
type DecodeError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *DecodeError) Error() string {
	if e.Field != "" {
		return "decode " + e.Field + ": " + e.Message
	}
	return "decode: " + e.Message
}

// Malformed reports whether the body is not well-formed JSON at all (empty,
// syntax, bad UTF-8, too deep, trailing data) as opposed to well-formed JSON
// that does not fit the target type (unknown field, wrong type).
func (e *DecodeError) Malformed() bool {
	switch e.Code {
	case DecodeUnknownField, DecodeType:
		return false
	}
	return true
}

// Decode reads one JSON document from r into v (a non-nil pointer), strictly:
// the body must be valid UTF-8, nest at most MaxDepth levels, hold exactly one
// JSON value (only white space after it), and every object member must name a
// field of the target type exactly (case-sensitive: encoding/json alone would
// accept "Name" for "name", which lets two parsers disagree about a document).
// Numbers must fit the target field.
//
// Problems with the body are returned as *DecodeError. An error of r itself
// (such as *http.MaxBytesError) is returned wrapped, not as a DecodeError, so
// that the caller can map it (413).
func Decode(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	return DecodeBytes(data, v)
}

// DecodeBytes is Decode for a body already in memory.
func DecodeBytes(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("config.Decode: target must be a non-nil pointer, not %T", v)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return &DecodeError{Code: DecodeEmpty, Message: "the body is empty; a JSON document was expected"}
	}
	if !utf8.Valid(data) {
		off := invalidUTF8Offset(data)
		return &DecodeError{Code: DecodeUTF8, Message: fmt.Sprintf("invalid UTF-8 at byte offset %d", off)}
	}
	if off, ok := depthOK(data, MaxDepth); !ok {
		return &DecodeError{Code: DecodeDepth,
			Message: fmt.Sprintf("nesting deeper than %d levels at byte offset %d", MaxDepth, off)}
	}

	// First pass: generic tree. It finds syntax errors and trailing data
	// with offsets, and gives the shape check below something to walk.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return syntaxError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &DecodeError{Code: DecodeTrailing,
			Message: fmt.Sprintf("unexpected data after the JSON document at byte offset %d", dec.InputOffset())}
	}

	// A null where a pointer is decoded (a server of a stored delta)
	// would leave a nil the caller never checks for.
	if raw == nil && rv.Elem().Kind() == reflect.Pointer {
		return &DecodeError{Code: DecodeType, Message: "expected " + shapeName(rv.Elem().Type()) + ", got null"}
	}

	// Second pass: every member must exist in the target type, with exact
	// case, and every value must have the field's JSON type.
	if derr := checkShape(raw, rv.Type().Elem(), ""); derr != nil {
		return derr
	}

	// Third pass: the real decode. After the checks above it fails only for
	// types with custom unmarshalers; map whatever it says.
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &DecodeError{Field: dottedToPointer(te.Field), Code: DecodeType,
				Message: fmt.Sprintf("expected %s, got JSON %s", te.Type, te.Value)}
		}
		if strings.HasPrefix(err.Error(), "json: unknown field") {
			return &DecodeError{Code: DecodeUnknownField, Message: strings.TrimPrefix(err.Error(), "json: ")}
		}
		return &DecodeError{Code: DecodeType, Message: strings.TrimPrefix(err.Error(), "json: ")}
	}
	return nil
}

func syntaxError(err error) *DecodeError {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &DecodeError{Code: DecodeSyntax,
			Message: fmt.Sprintf("%s at byte offset %d", strings.TrimPrefix(se.Error(), "json: "), se.Offset)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &DecodeError{Code: DecodeSyntax, Message: "the JSON document is truncated"}
	case errors.Is(err, io.EOF):
		return &DecodeError{Code: DecodeEmpty, Message: "the body is empty; a JSON document was expected"}
	}
	return &DecodeError{Code: DecodeSyntax, Message: strings.TrimPrefix(err.Error(), "json: ")}
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// depthOK scans the raw bytes (strings skipped) and reports the offset of
// the first bracket nesting deeper than max. It runs before any parsing so a
// hostile body cannot make the parser recurse.
func depthOK(b []byte, max int) (int, bool) {
	depth := 0
	inStr, esc := false, false
	for i, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > max {
				return i, false
			}
		case '}', ']':
			depth--
		}
	}
	return 0, true
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkShape walks the generic tree raw against the Go type t and returns the
// first member that t does not have or whose JSON type does not fit, in a
// deterministic order (object members sorted by name).
func checkShape(raw any, t reflect.Type, ptr string) *DecodeError {
	if raw == nil {
		return nil // null is accepted anywhere, as encoding/json does
	}
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil // the type decides; the final decode reports its errors
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkShape(raw, t.Elem(), ptr)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		obj, ok := raw.(map[string]any)
		if !ok {
			return typeError(ptr, "an object", raw)
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				return &DecodeError{Field: ptr + "/" + escapePointer(k), Code: DecodeUnknownField,
					Message: fmt.Sprintf("unknown field %q", k)}
			}
			if derr := checkShape(obj[k], f, ptr+"/"+escapePointer(k)); derr != nil {
				return derr
			}
		}
		return nil
	case reflect.Map:
		obj, ok := raw.(map[string]any)
		if !ok {
			return typeError(ptr, "an object", raw)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if derr := checkShape(obj[k], t.Elem(), ptr+"/"+escapePointer(k)); derr != nil {
				return derr
			}
		}
		return nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			if _, ok := raw.(string); ok {
				return nil // []byte as base64
			}
		}
		arr, ok := raw.([]any)
		if !ok {
			return typeError(ptr, "an array", raw)
		}
		if t.Kind() == reflect.Array && len(arr) > t.Len() {
			return &DecodeError{Field: ptr, Code: DecodeType,
				Message: fmt.Sprintf("at most %d elements allowed", t.Len())}
		}
		for i, e := range arr {
			if e == nil && t.Elem().Kind() == reflect.Pointer {
				// a list of pointers (Backend.Servers) holds no nil: the
				// code that reads it never checks for one
				return &DecodeError{Field: ptr + "/" + strconv.Itoa(i), Code: DecodeType, Message: "expected " + shapeName(t.Elem()) + ", got null"}
			}
			if derr := checkShape(e, t.Elem(), ptr+"/"+strconv.Itoa(i)); derr != nil {
				return derr
			}
		}
		return nil
	case reflect.String:
		if _, ok := raw.(string); !ok {
			return typeError(ptr, "a string", raw)
		}
		return nil
	case reflect.Bool:
		if _, ok := raw.(bool); !ok {
			return typeError(ptr, "a boolean", raw)
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := raw.(json.Number)
		if !ok {
			return typeError(ptr, "an integer", raw)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return numberError(ptr, n, t)
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := raw.(json.Number)
		if !ok {
			return typeError(ptr, "a non-negative integer", raw)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return numberError(ptr, n, t)
		}
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := raw.(json.Number)
		if !ok {
			return typeError(ptr, "a number", raw)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return numberError(ptr, n, t)
		}
		return nil
	}
	return &DecodeError{Field: ptr, Code: DecodeType, Message: fmt.Sprintf("cannot decode into %s", t)}
}

// shapeName is the JSON kind a value of t is written as, for a message.
func shapeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}

func numberError(ptr string, n json.Number, t reflect.Type) *DecodeError {
	if _, err := strconv.ParseInt(string(n), 10, 64); err != nil && t.Kind() != reflect.Float32 && t.Kind() != reflect.Float64 {
		if strings.ContainsAny(string(n), ".eE") {
			return &DecodeError{Field: ptr, Code: DecodeType, Message: fmt.Sprintf("%s is not an integer", n)}
		}
	}
	return &DecodeError{Field: ptr, Code: DecodeType, Message: fmt.Sprintf("%s does not fit in %s", n, t)}
}

func typeError(ptr, want string, raw any) *DecodeError {
	return &DecodeError{Field: ptr, Code: DecodeType, Message: "expected " + want + ", got " + jsonKind(raw)}
}

func jsonKind(raw any) string {
	switch raw.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", raw)
}

// jsonFields maps the JSON member names of struct type t to their types,
// following encoding/json's rules for tags and untagged embedded structs
// (without its conflict resolution, which the model does not need).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ft := f.Type
		if slices.Contains(strings.Split(opts, ","), "string") {
			ft = reflect.TypeFor[any]() // ",string" fields: let encoding/json check
		}
		out[name] = ft
	}
	return out
}

// escapePointer escapes one reference token of a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	s = strings.ReplaceAll(s, "~", "~0")
	return strings.ReplaceAll(s, "/", "~1")
}

// dottedToPointer turns encoding/json's "a.b.c" field path into "/a/b/c".
func dottedToPointer(s string) string {
	if s == "" {
		return ""
	}
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = escapePointer(p)
	}
	return "/" + strings.Join(parts, "/")
}
