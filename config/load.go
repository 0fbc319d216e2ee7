package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/berth-sh/berth"
)

// FileName is the name of the config file in the berth home directory.
const FileName = "config.toml"

// EnvPrefix starts every environment override: BERTH_<SECTION>_<KEY>.
const EnvPrefix = "BERTH_"

// DefaultPath is where the config file lives when --config is not given.
func DefaultPath(home string) string { return filepath.Join(home, FileName) }

// Load returns the configuration read from the TOML file at path, then
// overridden by environ (a list of "KEY=VALUE", as os.Environ returns), then
// validated. path "" means no file: defaults plus environment. A path that
// is given but cannot be read is an error; use LoadDefault for the default
// location, where a missing file is fine.
func Load(path string, environ []string) (*Config, error) {
	return load(path, false, environ)
}

// LoadDefault is Load of DefaultPath(home), where a missing file means
// defaults plus environment.
func LoadDefault(home string, environ []string) (*Config, error) {
	return load(DefaultPath(home), true, environ)
}

// load reads path (when not ""), tolerating its absence when optional.
func load(path string, optional bool, environ []string) (*Config, error) {
	c := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := c.decode(b); err != nil {
				return nil, err
			}
		case optional && errors.Is(err, fs.ErrNotExist):
			// No file at the default location: defaults apply.
		default:
			// The path stays in the cause only: messages never hold host paths.
			return nil, berth.WrapError(berth.EInvalid, err, "config: cannot read the config file")
		}
	}
	if err := c.applyEnv(environ); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decode strictly decodes a TOML document over c.
func (c *Config) decode(b []byte) error {
	err := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields().Decode(c)
	if err == nil {
		return nil
	}
	var strict *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case errors.As(err, &strict):
		keys := make([]string, 0, len(strict.Errors))
		for i := range strict.Errors {
			line, _ := strict.Errors[i].Position()
			keys = append(keys, fmt.Sprintf("%q (line %d)", strings.Join(strict.Errors[i].Key(), "."), line))
		}
		if len(keys) == 1 {
			return invalid("unknown key %s", keys[0])
		}
		return invalid("unknown keys %s", strings.Join(keys, ", "))
	case errors.As(err, &de):
		line, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		// Say "got a TOML string, want int" rather than naming Go fields.
		if m := typeMismatch().FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("wrong type: got a TOML %s, want %s", m[1], strings.TrimPrefix(m[2], "config."))
		}
		if key := de.Key(); len(key) > 0 {
			return invalid("%s (line %d): %s", strings.Join(key, "."), line, msg)
		}
		return invalid("line %d, column %d: %s", line, col, msg)
	default:
		// A TextUnmarshaler given a non-string value fails without a key:
		// find the key ourselves.
		if key := badDurationKey(b); key != "" {
			return invalid("%s: %s", key, strings.TrimPrefix(err.Error(), "toml: "))
		}
		return invalid("%s", strings.TrimPrefix(err.Error(), "toml: "))
	}
}

// typeMismatch matches go-toml's message for a value of the wrong type
// (compiled on first use: package init runs in every berth process).
var typeMismatch = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^cannot decode TOML (\w+) into .* of type (\S+)$`) })

// badDurationKey returns "section.key" of the first Duration value in the
// document that does not parse, or "".
func badDurationKey(b []byte) string {
	var doc map[string]any
	if toml.Unmarshal(b, &doc) != nil {
		return ""
	}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		sec := t.Field(i)
		table, ok := doc[sec.Tag.Get("toml")].(map[string]any)
		if !ok || sec.Type.Kind() != reflect.Struct {
			continue
		}
		for j := range sec.Type.NumField() {
			f := sec.Type.Field(j)
			v, present := table[f.Tag.Get("toml")]
			if !present || f.Type != durationType {
				continue
			}
			var err error
			switch v := v.(type) {
			case string:
				_, err = parseDuration(v)
			case int64:
				_, err = parseDuration(strconv.FormatInt(v, 10))
			default:
				err = errors.New("not a duration")
			}
			if err != nil {
				return sec.Tag.Get("toml") + "." + f.Tag.Get("toml")
			}
		}
	}
	return ""
}

// applyEnv applies BERTH_<SECTION>_<KEY> overrides for the sections server,
// store, sandbox and limits. Other BERTH_* variables (BERTH_HOME, BERTH_ADDR,
// …) are not configuration and are ignored; an unknown key of a known
// section is an error. When a variable appears twice, the last one wins.
func (c *Config) applyEnv(environ []string) error {
	root := reflect.ValueOf(c).Elem()
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		sec, key, ok := strings.Cut(strings.ToLower(name[len(EnvPrefix):]), "_")
		if !ok {
			continue
		}
		section, ok := fieldByTag(root, sec)
		if !ok || section.Kind() != reflect.Struct {
			continue
		}
		field, ok := fieldByTag(section, key)
		if !ok {
			// A key of a sub-section: BERTH_SANDBOX_DOCKER_IMAGE is sandbox.docker.image.
			if sub, rest, cut := strings.Cut(key, "_"); cut {
				if subsection, found := fieldByTag(section, sub); found && subsection.Kind() == reflect.Struct {
					field, ok = fieldByTag(subsection, rest)
					key = sub + "." + rest
				}
			}
		}
		if !ok {
			return invalid("%s: unknown key %q", name, sec+"."+key)
		}
		if err := setFromString(field, val); err != nil {
			return invalid("%s: %s.%s: %v", name, sec, key, err)
		}
	}
	return nil
}

// fieldByTag returns the field of struct v whose toml tag names key.
func fieldByTag(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		if tag == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// durationType is handled before the kind switch: Duration is a struct.
var durationType = reflect.TypeFor[Duration]()

// setFromString parses s into f according to f's type.
func setFromString(f reflect.Value, s string) error {
	if f.Type() == durationType {
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		f.Set(reflect.ValueOf(Duration{d}))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("invalid boolean %q (want true or false)", s)
		}
		f.SetBool(b)
	case reflect.Int:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 0)
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		f.SetInt(n)
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("cannot be set from the environment")
		}
		// A comma-separated list; empty items are dropped.
		var items []string
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		f.Set(reflect.ValueOf(items))
	case reflect.Interface:
		// [sandbox] network: true, false, or an allow list, its entries
		// comma-separated.
		if b, err := strconv.ParseBool(strings.TrimSpace(s)); err == nil {
			f.Set(reflect.ValueOf(b))
			return nil
		}
		var allow []any
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				allow = append(allow, item)
			}
		}
		f.Set(reflect.ValueOf(map[string]any{"allow": allow}))
	case reflect.Float64:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("invalid number %q", s)
		}
		f.SetFloat(x)
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}
