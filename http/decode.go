package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/berth-sh/berth"
)

// jsonSlack is what a JSON body may hold beyond the prompt text: the other
// fields of a create request, whitespace and punctuation.
const jsonSlack = 64 << 10

// defaultMaxPromptBytes is limits.max_prompt_bytes when the options leave it 0.
const defaultMaxPromptBytes = 256 << 10

// bodyLimit returns the largest request body accepted (bodyLimitFor).
func (e *edge) bodyLimit() int64 { return bodyLimitFor(e.maxPrompt) }

// bodyLimitFor returns the largest request body accepted when prompts are
// capped at maxPrompt bytes. A prompt of n bytes may take up to 6n bytes
// once escaped in JSON ("\u003c" for "<"), so the cap leaves room for that;
// the prompt itself is then checked against its own cap to answer 413 with
// the exact numbers.
func bodyLimitFor(maxPrompt int) int64 { return 6*int64(maxPrompt) + jsonSlack }

// maxPromptOf returns the prompt cap in force for limits.max_prompt_bytes n
// (0: the default).
func maxPromptOf(n int) int {
	if n > 0 {
		return n
	}
	return defaultMaxPromptBytes
}

// decodeJSON reads the request body into v strictly (decodeStrict), up to
// bodyLimit.
func (e *edge) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeStrict(w, r, v, e.bodyLimit())
}

// decodeStrict reads the request body into v strictly: unknown fields,
// malformed JSON, wrong types, an empty body and trailing data are
// EInvalid with a message naming the field where there is one; a body over
// limit is ETooLarge. The API and the tools socket decode alike.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return decodeError(err, limit)
	}
	return decodeStrictBytes(raw, v, limit)
}

// decodeStrictBytes is decodeStrict of a body already read.
func decodeStrictBytes(raw []byte, v any, limit int64) error {
	if int64(len(raw)) > limit {
		return decodeError(&http.MaxBytesError{Limit: limit}, limit)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, limit)
	}
	// Anything after the one JSON value, other than whitespace, is refused.
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return berth.Errorf(berth.EInvalid, "request body has data after the JSON object")
	}
	return exactFields(raw, v)
}

// exactFields refuses top-level field names that encoding/json matched
// case-insensitively ("AGENT" for "agent"): the API's names are exact, and
// anything else is an unknown field.
func exactFields(raw []byte, v any) error {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	known := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		known[name] = true
	}
	for name := range fields {
		if !known[name] {
			return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("unknown field %q", name),
				Details: map[string]any{"field": name}}
		}
	}
	return nil
}

// decodeError turns a json decoding error into a user-facing *berth.Error.
func decodeError(err error, limit int64) error {
	var (
		tooLarge  *http.MaxBytesError
		syntax    *json.SyntaxError
		typeError *json.UnmarshalTypeError
		own       *berth.Error
	)
	switch {
	case errors.As(err, &own):
		// A field's own decoding said what is wrong, naming it (the
		// network policy: docs/api.md, Network policy).
		return own
	case errors.As(err, &tooLarge):
		return &berth.Error{Code: berth.ETooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", limit),
			Details: map[string]any{"max_bytes": limit}, Err: err}
	case errors.Is(err, io.EOF):
		return berth.Errorf(berth.EInvalid, "request body is empty: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return berth.Errorf(berth.EInvalid, "malformed JSON: the body ends too early")
	case errors.As(err, &syntax):
		return berth.Errorf(berth.EInvalid, "malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typeError):
		if typeError.Field == "" {
			return berth.Errorf(berth.EInvalid, "request body must be a JSON object, not %s", typeError.Value)
		}
		return &berth.Error{Code: berth.EInvalid,
			Message: fmt.Sprintf("field %q must be %s, not %s", typeError.Field, jsonKind(typeError.Type.String()), typeError.Value),
			Details: map[string]any{"field": typeError.Field}}
	}
	// encoding/json has no typed error for an unknown field; it says
	// `json: unknown field "name"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field, uerr := strconv.Unquote(name)
		if uerr != nil {
			field = name
		}
		return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("unknown field %q", field),
			Details: map[string]any{"field": field}}
	}
	return berth.WrapError(berth.EInvalid, err, "malformed JSON body")
}

// jsonKind names a Go type the way a JSON user thinks of it.
func jsonKind(goType string) string {
	switch {
	case goType == "string" || strings.HasSuffix(goType, "State"):
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"):
		return "an object"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "a " + goType
}

// queryInt parses an optional integer query parameter no smaller than min;
// absent or empty gives def.
func queryInt(q url.Values, name string, def, min int64) (int64, error) {
	raw := q.Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("query parameter %q must be an integer, not %q", name, raw),
			Details: map[string]any{"parameter": name}}
	}
	if n < min {
		return 0, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("query parameter %q must be at least %d", name, min),
			Details: map[string]any{"parameter": name}}
	}
	return n, nil
}

// queryBool parses an optional boolean query parameter; absent gives false.
func queryBool(q url.Values, name string) (bool, error) {
	raw := q.Get(name)
	if raw == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return false, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("query parameter %q must be true or false, not %q", name, raw),
			Details: map[string]any{"parameter": name}}
	}
	return b, nil
}
