package stages

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/augmentdata/augment/verify/hftok"
)

// loadTokenizer reads a tokenizer.json (relative to dir) and returns it with
// the file's SHA-256.
func loadTokenizer(dir, path string) (*hftok.Tokenizer, string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	tok, err := hftok.Parse(b)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return tok, hex.EncodeToString(sum[:]), nil
}
