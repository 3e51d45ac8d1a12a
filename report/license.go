package report

import (
	"slices"
	"strings"
)

// hubLicenses are the license ids the Hugging Face Hub's card metadata
// check accepts in `license:` (the Hub documentation's "Licenses" page; the
// list huggingface_hub's validation printed in 2026). A card whose license
// is not one of them is refused on upload.
var hubLicenses = []string{
	"apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m",
	"bigscience-bloom-rail-1.0", "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0",
	"bsd", "bsd-2-clause", "bsd-3-clause", "bsd-3-clause-clear", "c-uda",
	"cc", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0",
	"cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0",
	"cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
	"cdla-sharing-1.0", "cdla-permissive-1.0", "cdla-permissive-2.0",
	"wtfpl", "ecl-2.0", "epl-1.0", "epl-2.0", "etalab-2.0", "eupl-1.1", "eupl-1.2",
	"agpl-3.0", "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1", "lgpl-3.0",
	"isc", "h-research", "intel-research", "lppl-1.3c", "ms-pl", "apple-ascl", "apple-amlr", "mpl-2.0",
	"odc-by", "odbl", "openmdw-1.0", "openrail++", "osl-3.0", "postgresql", "ofl-1.1", "ncsa",
	"unlicense", "zlib", "pddl", "lgpl-lr", "deepfloyd-if-license", "fair-noncommercial-research-license",
	"llama2", "llama3", "llama3.1", "llama3.2", "llama3.3", "llama4", "grok2-community", "gemma",
	"unknown", "other",
}

// spdxToHub maps SPDX license ids (lowercased) whose spelling is not the
// Hub's to the Hub id of the same license, or of its family where the Hub
// lists no such version. An SPDX "-only" or "-or-later" ("+") id not here
// maps as its version does (gpl-3.0-or-later → gpl-3.0).
var spdxToHub = map[string]string{
	"odbl-1.0":   "odbl",
	"odc-by-1.0": "odc-by",
	"pddl-1.0":   "pddl",
	"c-uda-1.0":  "c-uda",
	"lgpllr":     "lgpl-lr",
	"gpl-1.0":    "gpl",
	"lgpl-2.0":   "lgpl",
	"gfdl-1.1":   "gfdl",
	"gfdl-1.2":   "gfdl",
	"gfdl-1.3":   "gfdl",
}

// HubLicense returns the Hub's license id for a declared license: a Hub id
// or an SPDX id, in any case ("Apache-2.0", "GPL-3.0-or-later"). ok is
// false for anything else (a typo, free text, a license the Hub does not
// list: declare that one as "other" with a license_name).
func HubLicense(declared string) (id string, ok bool) {
	l := strings.ToLower(strings.TrimSpace(declared))
	for range 2 {
		if slices.Contains(hubLicenses, l) {
			return l, true
		}
		if h, ok := spdxToHub[l]; ok {
			return h, true
		}
		// The SPDX qualifiers the Hub's ids leave out: the version's id
		// names the license the "only" and "or later" forms grant.
		base := strings.TrimSuffix(l, "+")
		for _, suf := range []string{"-only", "-or-later"} {
			base = strings.TrimSuffix(base, suf)
		}
		if base == l || base == "" {
			break
		}
		l = base
	}
	return "", false
}
