package objstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"slices"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"golang.org/x/sync/errgroup"
)

// Packs. A Tree writes the small files of a workspace or HOME into a few
// packs (packs/sha256/<2 hex>/<hex>, named by their own SHA-256) rather
// than one blob each, so that a restore reads thousands of them in a few
// GETs (docs/api.md, "Session state in an object store"). A manifest's
// File names its pack and its offset there; its sha256 and size stay the
// file's own, checked as it is restored.

// PackMaxFile is the largest file a Tree packs; a larger one is a blob.
const PackMaxFile = 64 << 10

// packBytes bounds the packs a Tree writes: one is put before a file
// would take it past.
const packBytes = 4 << 20

// maxPackBytes bounds the packs a restore reads (a later writer may make
// bigger ones than packBytes): a file past it is a damaged state.
const maxPackBytes = 64 << 20

// maxGap is the most bytes that no restored file needs a restore reads
// through between two files of a pack rather than starting another read.
const maxGap = 1 << 20

// emptyHash is the SHA-256 of no bytes: an empty file's, in no object.
const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// packed is one content of a pack: its hash and where it starts.
type packed struct {
	hash   string
	offset int64
}

// place is where a pack holds a content: pack "" while it is the pack
// being filled.
type place struct {
	pack   string
	offset int64
}

// packer gathers the small files of one Tree into packs: each new
// content is appended to the pack being filled, which is put through the
// Tree's group once full and at the walk's end. A content the Uploader
// or this Tree packed already is pointed at, not packed again. Used by
// the walk's goroutine only.
type packer struct {
	ctx context.Context
	u   *Uploader
	g   *errgroup.Group
	t   *Tree
	// buf is the pack being filled and contents what it holds; members
	// are the indexes in t.Files of the files whose bytes are in it,
	// named once it is sealed.
	buf      []byte
	contents []packed
	members  []int
	// placed is where this Tree packed each content.
	placed map[string]place
}

// newPacker returns the packer of a Tree that makes t, putting its packs
// through g.
func newPacker(ctx context.Context, u *Uploader, g *errgroup.Group, t *Tree) *packer {
	return &packer{ctx: ctx, u: u, g: g, t: t, placed: map[string]place{}}
}

// add gives file, a small file f of the walk about to be appended to
// t.Files, its hash and place in a pack; p is its entry in the previous
// walk (zero when none). checkpoint.ErrChanged when f changed under the
// read.
func (pk *packer) add(file *File, f *checkpoint.ScanFile, p checkpoint.Entry) error {
	if f.Size == 0 {
		// An empty file's content is in no object.
		file.SHA256 = emptyHash
		return nil
	}
	if p.Hash != "" && checkpoint.SameStat(&p, &f.Entry) && pk.reuse(file, p.Hash) {
		return nil
	}
	if int64(len(pk.buf))+f.Size > packBytes {
		pk.seal()
	}
	start := len(pk.buf)
	hash, err := pk.read(f)
	if err != nil {
		pk.buf = pk.buf[:start]
		return err
	}
	if pk.reuse(file, hash) {
		// Packed already: the copy goes.
		pk.buf = pk.buf[:start]
		return nil
	}
	file.SHA256, file.Offset = hash, int64(start)
	pk.placed[hash] = place{offset: int64(start)}
	pk.contents = append(pk.contents, packed{hash: hash, offset: int64(start)})
	pk.members = append(pk.members, len(pk.t.Files))
	return nil
}

// reuse points file at the pack that holds the content of hash already,
// this Tree's or one the Uploader put; false when none does.
func (pk *packer) reuse(file *File, hash string) bool {
	if at, ok := pk.placed[hash]; ok {
		file.SHA256, file.Pack, file.Offset = hash, at.pack, at.offset
		if at.pack == "" {
			pk.members = append(pk.members, len(pk.t.Files))
		}
		return true
	}
	if pack, off, ok := pk.u.packed(hash); ok {
		file.SHA256, file.Pack, file.Offset = hash, pack, off
		return true
	}
	return false
}

// read appends the content of f to buf and returns its hash;
// checkpoint.ErrChanged when its size changed under the read. The caller
// cuts buf back on an error.
func (pk *packer) read(f *checkpoint.ScanFile) (string, error) {
	src, err := f.Open()
	if err != nil {
		return "", err
	}
	defer src.Close()
	start := len(pk.buf)
	pk.buf = slices.Grow(pk.buf, int(f.Size))[:start+int(f.Size)]
	_, err = io.ReadFull(src, pk.buf[start:])
	if err == nil {
		// A byte more: the file grew.
		var one [1]byte
		if n, _ := src.Read(one[:]); n > 0 {
			err = checkpoint.ErrChanged
		}
	} else if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = checkpoint.ErrChanged
	}
	if errors.Is(err, checkpoint.ErrChanged) {
		return "", err
	}
	if err != nil {
		return "", berth.WrapError(berth.EInternal, err, "read %s", f.Path)
	}
	sum := sha256.Sum256(pk.buf[start:])
	return hex.EncodeToString(sum[:]), nil
}

// seal names the pack being filled after its bytes, points its files at
// it, and puts it through g (waiting while Workers puts are under way);
// the next file begins another.
func (pk *packer) seal() {
	if len(pk.contents) == 0 {
		return
	}
	sum := sha256.Sum256(pk.buf)
	name := hex.EncodeToString(sum[:])
	for _, i := range pk.members {
		pk.t.Files[i].Pack = name
	}
	for _, c := range pk.contents {
		pk.placed[c.hash] = place{pack: name, offset: c.offset}
	}
	body, contents := pk.buf, pk.contents
	pk.buf, pk.contents, pk.members = nil, nil, nil
	pk.g.Go(func() error { return pk.u.putPack(pk.ctx, name, body, contents) })
}

// putPack puts the pack name, body, unless the store has it already,
// then records where it holds contents.
func (u *Uploader) putPack(ctx context.Context, name string, body []byte, contents []packed) error {
	u.heads.Add(1)
	size, ok, err := u.c.Stat(ctx, PackKey(name))
	if err != nil {
		return err
	}
	if !ok || size != int64(len(body)) {
		if err := u.c.Put(ctx, PackKey(name), bytes.NewReader(body), int64(len(body))); err != nil {
			return err
		}
		u.puts.Add(1)
		u.putBytes.Add(int64(len(body)))
	}
	u.markPacked(name, contents)
	return nil
}

// checkPacked checks the place a manifest gives a packed file: a pack's
// name, and 1 to PackMaxFile bytes within maxPackBytes.
func checkPacked(f File) error {
	if !checkpoint.ValidHash(f.Pack) || f.Size < 1 || f.Size > PackMaxFile || f.Offset < 0 || f.Offset > maxPackBytes-f.Size {
		return berth.Errorf(berth.EInternal, "object store: the state has a bad place in a pack")
	}
	return nil
}

// packRange is a part of one pack a restore reads, [start, end), and the
// files whose bytes are in it, by offset.
type packRange struct {
	pack       string
	start, end int64
	files      []File
}

// packRanges groups packed files (each checked by checkPacked) into the
// ranges to read: a file's bytes overlap no other's unless both are the
// same content at the same place (EInternal).
func packRanges(files []File) ([]packRange, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int {
		return cmp.Or(cmp.Compare(a.Pack, b.Pack), cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Path, b.Path))
	})
	var ranges []packRange
	for i, f := range files {
		end := f.Offset + f.Size
		if i > 0 && files[i-1].Pack == f.Pack {
			prev := files[i-1]
			same := prev.Offset == f.Offset && prev.Size == f.Size && prev.SHA256 == f.SHA256
			if !same && f.Offset < prev.Offset+prev.Size {
				return nil, berth.Errorf(berth.EInternal, "object store: the state has files overlapping in a pack")
			}
			if r := &ranges[len(ranges)-1]; f.Offset-r.end <= maxGap {
				r.end = max(r.end, end)
				r.files = append(r.files, f)
				continue
			}
		}
		ranges = append(ranges, packRange{pack: f.Pack, start: f.Offset, end: end, files: []File{f}})
	}
	return ranges, nil
}

// restoreRange reads r from its pack and writes each of its files, its
// bytes checked against its hash before anything is written (EInternal
// when they do not match, or when the pack ends before them).
func restoreRange(ctx context.Context, c *Client, root *os.Root, r packRange, opts RestoreOptions) error {
	body, err := c.GetRange(ctx, PackKey(r.pack), r.start, r.end-r.start)
	if err != nil {
		return err
	}
	defer body.Close()
	buf := make([]byte, PackMaxFile)
	pos := r.start
	var last *File
	for i := range r.files {
		f := &r.files[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		// The same content at the same place: its bytes are in buf.
		if last == nil || last.Offset != f.Offset || last.Size != f.Size || last.SHA256 != f.SHA256 {
			if err := readAt(body, &pos, f.Offset, buf[:f.Size]); err != nil {
				return c.wrapPackRead(err, f.Path)
			}
			if sum := sha256.Sum256(buf[:f.Size]); hex.EncodeToString(sum[:]) != f.SHA256 {
				return berth.Errorf(berth.EInternal, "object store: the packed bytes of %s do not match its hash", f.Path)
			}
			last = f
		}
		if err := writeFile(root, *f, buf[:f.Size], opts); err != nil {
			return err
		}
	}
	return nil
}

// readAt fills b from r, which is at *pos, with the bytes from off on.
func readAt(r io.Reader, pos *int64, off int64, b []byte) error {
	if _, err := io.CopyN(io.Discard, r, off-*pos); err != nil {
		return err
	}
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	*pos = off + int64(len(b))
	return nil
}

// wrapPackRead gives a failed read of a pack a code: EInternal when the
// pack ended before the file's bytes (the state is damaged).
func (c *Client) wrapPackRead(err error, path string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return berth.Errorf(berth.EInternal, "object store: the pack of %s ends before its bytes", path)
	}
	return c.wrap(err, "read the pack of %s", path)
}
