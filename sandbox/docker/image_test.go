package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
)

// The default image's /etc/passwd and label name the user it is built
// for.
func TestBuildContextNamesTheUser(t *testing.T) {
	helper := findHelper("")
	if helper == "" {
		t.Fatal("no static busybox on this host (apt-get install busybox-static)")
	}
	b, err := buildContext(helper, 77001, 77002)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "Dockerfile" || strings.HasPrefix(h.Name, "rootfs/etc/") {
			body, _ := io.ReadAll(tr)
			files[h.Name] = string(body)
		}
	}
	if !strings.Contains(files["rootfs/etc/passwd"], "\nberth:x:77001:77002:") || !strings.Contains(files["rootfs/etc/group"], "\nberth:x:77002:") {
		t.Errorf("passwd %q, group %q", files["rootfs/etc/passwd"], files["rootfs/etc/group"])
	}
	if !strings.Contains(files["Dockerfile"], `berth.user="77001:77002"`) {
		t.Errorf("Dockerfile %q", files["Dockerfile"])
	}
}

// Providers of two users share the engine and the default image's name:
// each builds the image for its own user when the name holds another's,
// and keeps making containers from its own build after the other's took
// the name.
func TestDefaultImageFollowsItsUser(t *testing.T) {
	image := "berth-sandbox:user-" + randomHex(4)
	pa := newProvider(t, Options{Image: image})
	pb := newProvider(t, Options{Image: image})
	ctx := t.Context()
	a := identity{uid: 77001, gid: 77001}
	b := identity{uid: 77002, gid: 77003}
	var built []string
	t.Cleanup(func() {
		removeImage(context.Background(), pa, image)
		for _, id := range built {
			removeImage(context.Background(), pa, id)
		}
	})
	ensure := func(p *Provider, who identity) string {
		t.Helper()
		id, err := p.ensureImage(ctx, image, who)
		if err != nil {
			t.Fatal(err)
		}
		built = append(built, id)
		return id
	}
	label := func(ref string) string {
		t.Helper()
		res, err := pa.cli.ImageInspect(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return imageUser(res)
	}
	ida := ensure(pa, a)
	idb := ensure(pb, b)
	if ida == idb || label(ida) != "77001:77001" || label(idb) != "77002:77003" || label(image) != "77002:77003" {
		t.Fatalf("builds %s (%s), %s (%s); the name holds %s", ida, label(ida), idb, label(idb), label(image))
	}
	if again := ensure(pa, a); again != ida {
		t.Errorf("the first provider now makes containers from %s, not its own build %s", again, ida)
	}
	pc := newProvider(t, Options{Image: image})
	if idc := ensure(pc, a); idc == idb || label(idc) != "77001:77001" {
		t.Errorf("a new provider for the first user took %s (%s)", idc, label(idc))
	}
}

// buildImage builds image on p's engine from the Dockerfile df, over the
// test image, removes it when the test ends and returns its id.
func buildImage(t *testing.T, p *Provider, image, df string) string {
	t.Helper()
	ensureTestImage(t, p)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
	_, _ = tw.Write([]byte(df))
	_ = tw.Close()
	res, err := p.cli.ImageBuild(t.Context(), &buf, client.ImageBuildOptions{Tags: []string{image}, Remove: true, Version: build.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	id, err := buildResult(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(context.Background(), p, image) })
	return id
}

// A default image of the user's own ([sandbox.docker] image), even one
// derived from berth's and so carrying its labels, is used as it is and
// never built over, whatever user it names.
func TestDefaultImageOfTheUsersIsKept(t *testing.T) {
	p := newProvider(t, Options{})
	ctx := t.Context()
	image := "berth-test-own:" + randomHex(4)
	own := buildImage(t, p, image, "FROM "+testImage+"\nENV AGENT_IMAGE=yes\n")
	q := newProvider(t, Options{Image: image})
	ref, err := q.ensureImage(ctx, image, identity{uid: 77001, gid: 77001})
	if err != nil || ref != image {
		t.Fatalf("ensureImage = %q, %v; want the name %q", ref, err, image)
	}
	if got, err := q.cli.ImageInspect(ctx, image); err != nil || got.ID != own {
		t.Fatalf("the user's image is now %s (%v), was %s", got.ID, err, own)
	}
	sb := openSandbox(t, q, berth.SandboxConfig{})
	if r := run(t, sb, nil, "sh", "-c", `echo "$AGENT_IMAGE"`); r.stdout != "yes\n" {
		t.Fatalf("in the user's image: %+v", r)
	}
}

// New does not look for the helper (an ELF header read on the daemon's way
// to its API): a busybox put in place after New is the one the provider
// binds when it first needs one.
func TestTheHelperIsFoundWhenFirstNeeded(t *testing.T) {
	src := findHelper("")
	if src == "" {
		t.Fatal("no static busybox on this host (apt-get install busybox-static)")
	}
	path := filepath.Join(t.TempDir(), "busybox")
	p, err := New(Options{Host: "unix:///nonexistent/docker.sock", Busybox: path})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := p.helper(); got != path {
		t.Fatalf("helper = %q, want the busybox put at %s after New", got, path)
	}
}
