package berth

import (
	"fmt"
	"maps"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes bounds a session's name (agents name the children they
// spawn: the bound is the daemon's, not only the MCP schema's).
const MaxNameBytes = 256

// MaxLabels bounds the labels of one session.
const MaxLabels = 64

// ValidateName checks a session name (create and PATCH).
func ValidateName(name string) error {
	if len(name) > MaxNameBytes || strings.IndexFunc(name, unicode.IsControl) >= 0 || !utf8.ValidString(name) {
		return &Error{Code: EInvalid, Details: map[string]any{"field": "name"},
			Message: fmt.Sprintf("name must be at most %d bytes of UTF-8 text without control characters", MaxNameBytes)}
	}
	return nil
}

// ValidateLabelKey checks one label key (create and PATCH).
func ValidateLabelKey(k string) error {
	if k == "" || strings.ContainsAny(k, "=,") {
		return Errorf(EInvalid, "label key %q is not valid", k)
	}
	return nil
}

// Validate checks what a patch asks before anything looks at the session:
// something to change, a valid name and valid label keys.
func (p *SessionPatch) Validate() error {
	if p.Empty() {
		return Errorf(EInvalid, "nothing to change: give name, labels, mode, model, config, max_cost_usd or max_tokens")
	}
	if err := ValidateBudget(p.MaxCostUSD, p.MaxTokens); err != nil {
		return err
	}
	if p.Name != nil {
		if err := ValidateName(*p.Name); err != nil {
			return err
		}
	}
	for k := range p.Labels {
		if err := ValidateLabelKey(k); err != nil {
			return err
		}
	}
	return nil
}

// CheckLabels refuses a patch that would leave a session whose labels are
// cur with more than MaxLabels.
func (p *SessionPatch) CheckLabels(cur map[string]string) error {
	if p.Labels == nil {
		return nil
	}
	s := Session{Labels: cur}
	p.ApplyOwn(&s)
	if len(s.Labels) > MaxLabels {
		return Errorf(EInvalid, "at most %d labels", MaxLabels)
	}
	return nil
}

// ApplyOwn applies to s the fields that are berth's own: the name, the
// labels (merged; null removes) and the budgets.
func (p *SessionPatch) ApplyOwn(s *Session) {
	if p.Name != nil {
		s.Name = *p.Name
	}
	if p.Labels != nil {
		labels := maps.Clone(s.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range p.Labels {
			if v == nil {
				delete(labels, k)
			} else {
				labels[k] = *v
			}
		}
		s.Labels = labels
	}
	if p.MaxCostUSD != nil {
		s.MaxCostUSD = new(*p.MaxCostUSD)
	}
	if p.MaxTokens != nil {
		s.MaxTokens = new(*p.MaxTokens)
	}
}

// OwnFields names the fields of berth's own that p changes.
func (p *SessionPatch) OwnFields() []string {
	var fields []string
	if p.Name != nil {
		fields = append(fields, "name")
	}
	if p.Labels != nil {
		fields = append(fields, "labels")
	}
	if p.MaxCostUSD != nil {
		fields = append(fields, LimitCost)
	}
	if p.MaxTokens != nil {
		fields = append(fields, LimitTokens)
	}
	return fields
}
