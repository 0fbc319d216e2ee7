// Package optx fills in the defaults of options structs.
package optx

// number is what Default takes: an integer or float kind (a
// time.Duration too).
type number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64 | ~float64
}

// Default sets *v to def when *v is zero or negative: an option left
// unset (or set to nonsense) takes its default.
func Default[T number](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
