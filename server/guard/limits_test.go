package guard

import (
	"errors"
	"testing"
)

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := smallLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Limits){
		func(l *Limits) { l.MaxArgs = 0 },
		func(l *Limits) { l.MaxArgs = MaxArgsCeiling + 1 },
		func(l *Limits) { l.MaxBulkLen = 0 },
		func(l *Limits) { l.MaxBulkLen = MaxBulkLenCeiling + 1 },
		func(l *Limits) { l.MaxInlineLen = MinMaxInlineLen - 1 },
		func(l *Limits) { l.MaxInlineLen = MaxInlineLenCeiling + 1 },
		func(l *Limits) { l.UnauthMaxArgs = 2 },
		func(l *Limits) { l.UnauthMaxArgs = l.MaxArgs + 1 },
		func(l *Limits) { l.UnauthMaxBulkLen = 0 },
		func(l *Limits) { l.UnauthMaxBulkLen = l.MaxBulkLen + 1 },
	}
	for i, mutate := range bad {
		l := DefaultLimits()
		mutate(&l)
		if err := l.Validate(); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("case %d: %+v validated (%v)", i, l, err)
		}
		if _, err := NewFramer(l, false); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("case %d: NewFramer accepted it", i)
		}
	}
}
