package pin

import (
	"errors"
	"slices"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestParseCPUListAcceptsKernelFormat(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"", []int{}},
		{"\n", []int{}},
		{"0", []int{0}},
		{"0-3\n", []int{0, 1, 2, 3}},
		{"0-3,5,7-8", []int{0, 1, 2, 3, 5, 7, 8}},
		{"7-8,0", []int{0, 7, 8}},        // any order
		{"0-3,2", []int{0, 1, 2, 3}},     // overlap merged, as the kernel does
		{"5-5", []int{5}},                // single-element range
		{"4095", []int{4095}},            // the bound itself
		{"007", []int{7}},                // leading zeros, as the kernel accepts
		{"  1,3  ", []int{1, 3}},         // surrounding blanks
		{"4094-4095", []int{4094, 4095}}, // range ending at the bound
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if err != nil {
			t.Errorf("ParseCPUList(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ParseCPUList(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseCPUListRejectsGarbage(t *testing.T) {
	for _, in := range []string{
		"a", "0,", ",0", "0,,1", "3-1", "-1", "1-", "0-3-5", "+1", "1 2", "0x1",
		"4096", "0-4096", "99999999999999999999", "0-4294967295", "0-15:2/4", "1.5",
	} {
		got, err := ParseCPUList(in)
		if err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want error", in, got)
			continue
		}
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("ParseCPUList(%q) error %v does not wrap ErrInvalid", in, err)
		}
	}
}

func TestFormatCPUListCompressesRuns(t *testing.T) {
	tests := []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{}, ""},
		{[]int{3}, "3"},
		{[]int{0, 1}, "0-1"},
		{[]int{0, 1, 2, 3, 5, 7, 8}, "0-3,5,7-8"},
		{[]int{8, 7, 0, 5, 3, 2, 1, 0}, "0-3,5,7-8"}, // unsorted, duplicated
		{[]int{-1, 2}, "2"},
	}
	for _, tt := range tests {
		orig := slices.Clone(tt.in)
		if got := FormatCPUList(tt.in); got != tt.want {
			t.Errorf("FormatCPUList(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if !slices.Equal(orig, tt.in) {
			t.Errorf("FormatCPUList modified its input: %v -> %v", orig, tt.in)
		}
	}
}

func TestCPUListRoundTrip(t *testing.T) {
	for _, s := range []string{"0", "0-1", "0-3,5,7-8", "1,3,5,7", "0-63,128-191,4095"} {
		l, err := ParseCPUList(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := FormatCPUList(l); got != s {
			t.Errorf("round trip %q -> %v -> %q", s, l, got)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,5,7-8", "", "3-1", "4095", "0,,1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseCPUList(s)
		if err != nil {
			return
		}
		for i, c := range l {
			if c < 0 || c > MaxCPU || (i > 0 && l[i-1] >= c) {
				t.Fatalf("ParseCPUList(%q) = %v: not sorted distinct in range", s, l)
			}
		}
		again, err := ParseCPUList(FormatCPUList(l))
		if err != nil || !slices.Equal(again, l) {
			t.Fatalf("format/parse of %v: %v, %v", l, again, err)
		}
	})
}
