// Package elicitschema checks an agent's elicitation form (ACP
// elicitation/create's requestedSchema, a flat JSON Schema object of
// primitive fields) and the content a user answers it with.
package elicitschema

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/google/jsonschema-go/jsonschema"
)

// Form is a checked requested schema: its fields, each with its own
// resolved schema, and which of them are required.
type Form struct {
	Fields   []Field
	Required []string
}

// Field is one property of a form.
type Field struct {
	Name string
	// Type is string, number, integer, boolean or array.
	Type string
	// Format is the string format (email, uri, date, date-time) or "".
	Format string
	Title  string
	// Enum lists the values a single or multi select offers.
	Enum     []string
	bounds   bounds
	resolved *jsonschema.Resolved
}

// bounds are the limits of a field a message names plainly.
type bounds struct {
	MinLength *int     `json:"minLength"`
	MaxLength *int     `json:"maxLength"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	MinItems  *int     `json:"minItems"`
	MaxItems  *int     `json:"maxItems"`
}

// property is the part of a field's schema the form reads beside
// jsonschema's own checks.
type property struct {
	Type   string            `json:"type"`
	Format string            `json:"format"`
	Title  string            `json:"title"`
	Enum   []json.RawMessage `json:"enum"`
	OneOf  []struct {
		Const json.RawMessage `json:"const"`
	} `json:"oneOf"`
	Items *struct {
		Enum  []json.RawMessage `json:"enum"`
		AnyOf []struct {
			Const json.RawMessage `json:"const"`
		} `json:"anyOf"`
	} `json:"items"`
}

// formats are the string formats ACP's StringPropertySchema allows.
var formats = map[string]bool{"": true, "email": true, "uri": true, "date": true, "date-time": true}

// Parse checks a requested schema: at most berth.MaxElicitationSchemaBytes
// and berth.MaxElicitationFields, type object, each property one of the
// primitive types ACP allows (string, number, integer, boolean, array of
// strings), no references, required naming properties. EInvalid (or
// ETooLarge) saying what is wrong.
func Parse(raw json.RawMessage) (*Form, error) {
	if len(raw) > berth.MaxElicitationSchemaBytes {
		return nil, berth.Errorf(berth.ETooLarge, "requested schema is %d bytes, over the limit of %d", len(raw), berth.MaxElicitationSchemaBytes)
	}
	if strings.Contains(string(raw), `"$ref"`) || strings.Contains(string(raw), `"$dynamicRef"`) {
		return nil, berth.Errorf(berth.EInvalid, "requested schema must not use references")
	}
	var top struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "requested schema is not a JSON object")
	}
	if top.Type != "" && top.Type != "object" {
		return nil, berth.Errorf(berth.EInvalid, "requested schema must be of type object, not %q", top.Type)
	}
	if len(top.Properties) > berth.MaxElicitationFields {
		return nil, berth.Errorf(berth.ETooLarge, "requested schema has %d fields, over the limit of %d", len(top.Properties), berth.MaxElicitationFields)
	}
	f := &Form{Required: top.Required}
	for name, p := range top.Properties {
		field, err := parseField(name, p)
		if err != nil {
			return nil, err
		}
		f.Fields = append(f.Fields, field)
	}
	sort.Slice(f.Fields, func(i, j int) bool { return f.Fields[i].Name < f.Fields[j].Name })
	for _, r := range top.Required {
		if _, ok := top.Properties[r]; !ok {
			return nil, berth.Errorf(berth.EInvalid, "requested schema requires %q, which it does not define", r)
		}
	}
	return f, nil
}

// parseField checks one property and resolves its schema.
func parseField(name string, raw json.RawMessage) (Field, error) {
	var p property
	if err := json.Unmarshal(raw, &p); err != nil {
		return Field{}, berth.WrapError(berth.EInvalid, err, "field %q of the requested schema", name)
	}
	switch p.Type {
	case "string", "number", "integer", "boolean", "array":
	default:
		return Field{}, berth.Errorf(berth.EInvalid, "field %q has type %q; a form field is string, number, integer, boolean or array", name, p.Type)
	}
	if !formats[p.Format] {
		return Field{}, berth.Errorf(berth.EInvalid, "field %q has format %q; allowed: email, uri, date, date-time", name, p.Format)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return Field{}, berth.WrapError(berth.EInvalid, err, "field %q of the requested schema", name)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return Field{}, berth.WrapError(berth.EInvalid, err, "field %q of the requested schema", name)
	}
	fd := Field{Name: name, Type: p.Type, Format: p.Format, Title: p.Title, resolved: rs}
	_ = json.Unmarshal(raw, &fd.bounds)
	consts := p.Enum
	for _, o := range p.OneOf {
		consts = append(consts, o.Const)
	}
	if p.Items != nil {
		consts = append(consts, p.Items.Enum...)
		for _, o := range p.Items.AnyOf {
			consts = append(consts, o.Const)
		}
	}
	for _, c := range consts {
		var v string
		if json.Unmarshal(c, &v) == nil {
			fd.Enum = append(fd.Enum, v)
		}
	}
	return fd, nil
}

// Check validates content against the form: every required field there,
// no field the form lacks, each value of its field's type, in its enum,
// bounds and format. EInvalid naming the first field that is wrong (the
// fields in name order).
func (f *Form) Check(content map[string]any) error {
	for _, r := range f.Required {
		if _, ok := content[r]; !ok {
			return fieldError(r, "is required")
		}
	}
	names := make([]string, 0, len(content))
	for k := range content {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		i := slices.IndexFunc(f.Fields, func(fd Field) bool { return fd.Name == k })
		if i < 0 {
			return fieldError(k, "is not a field of the form")
		}
		if err := f.Fields[i].check(content[k]); err != nil {
			return err
		}
	}
	return nil
}

// check validates one value: its type, choices, bounds and format in
// plain words, then anything else the field's schema says (a pattern…)
// through the schema validator.
func (fd Field) check(v any) error {
	// Round-trip through JSON so numbers are what the schema validator expects.
	b, err := json.Marshal(v)
	if err != nil {
		return fieldError(fd.Name, "cannot be encoded")
	}
	var inst any
	_ = json.Unmarshal(b, &inst)
	if msg := fd.plain(inst); msg != "" {
		return fieldError(fd.Name, msg)
	}
	if err := fd.resolved.Validate(inst); err != nil {
		return fieldError(fd.Name, "does not fit the form: "+tidy(err.Error()))
	}
	return nil
}

// plain is what is wrong with v in words, "" when nothing of what it
// checks is.
func (fd Field) plain(v any) string {
	switch fd.Type {
	case "string":
		return fd.plainString(v)
	case "number", "integer":
		return fd.plainNumber(v)
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case "array":
		return fd.plainArray(v)
	}
	return ""
}

// plainString is plain for a string field: its choices, length and format.
func (fd Field) plainString(v any) string {
	s, ok := v.(string)
	if !ok {
		return "must be a string"
	}
	if len(fd.Enum) > 0 && !slices.Contains(fd.Enum, s) {
		return "must be one of " + strings.Join(fd.Enum, ", ")
	}
	if msg := outside(len([]rune(s)), fd.bounds.MinLength, fd.bounds.MaxLength, "must be", " characters"); msg != "" {
		return msg
	}
	if fd.Format != "" {
		if err := checkFormat(fd.Format, s); err != nil {
			return err.Error()
		}
	}
	return ""
}

// plainNumber is plain for a number or integer field: its kind and range.
func (fd Field) plainNumber(v any) string {
	n, ok := v.(float64)
	if !ok {
		return "must be a number"
	}
	if fd.Type == "integer" && n != float64(int64(n)) {
		return "must be an integer"
	}
	return outside(n, fd.bounds.Minimum, fd.bounds.Maximum, "must be", "")
}

// plainArray is plain for an array field: strings only, each one of the
// choices, and how many.
func (fd Field) plainArray(v any) string {
	items, ok := v.([]any)
	if !ok {
		return "must be a list of strings"
	}
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return "must be a list of strings"
		}
		if len(fd.Enum) > 0 && !slices.Contains(fd.Enum, s) {
			return fmt.Sprintf("holds %q; each must be one of %s", s, strings.Join(fd.Enum, ", "))
		}
	}
	return outside(len(items), fd.bounds.MinItems, fd.bounds.MaxItems, "must hold", "")
}

// outside is what is wrong with n against the bounds lo and hi (nil for
// none) in words, verb and unit around the bound; "" within them.
func outside[T int | float64](n T, lo, hi *T, verb, unit string) string {
	if lo != nil && n < *lo {
		return fmt.Sprintf("%s at least %v%s", verb, *lo, unit)
	}
	if hi != nil && n > *hi {
		return fmt.Sprintf("%s at most %v%s", verb, *hi, unit)
	}
	return ""
}

// checkFormat checks a string against one of the formats ACP allows.
func checkFormat(format, s string) error {
	switch format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
			return fmt.Errorf("is not an email address")
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return fmt.Errorf("is not an absolute URI")
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return fmt.Errorf("is not a date (YYYY-MM-DD)")
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return fmt.Errorf("is not an RFC 3339 date-time")
		}
	}
	return nil
}

// tidy drops the validator's schema path from its message: the field is
// named already.
func tidy(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "validating") {
		return msg[i+2:]
	}
	return msg
}

// fieldError is the EInvalid of one field, with the field in its details.
func fieldError(name, what string) error {
	return &berth.Error{Code: berth.EInvalid, Message: "content." + name + " " + what,
		Details: map[string]any{"field": name}}
}
