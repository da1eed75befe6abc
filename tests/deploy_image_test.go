//go:build deploy

package tests

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ociIndex, ociManifest and ociConfig are the parts of an OCI image
// archive the test reads (image-spec's index.json, manifest and config).
type ociIndex struct {
	Manifests []struct{ Digest string } `json:"manifests"`
}

type ociManifest struct {
	Config struct{ Digest string } `json:"config"`
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	} `json:"layers"`
}

type ociConfig struct {
	Config struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		Labels       map[string]string   `json:"Labels"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Volumes      map[string]struct{} `json:"Volumes"`
	} `json:"config"`
}

// The image (make image) builds from this checkout, and what it holds runs:
// exported to an OCI archive, its layers unpacked into a directory, its
// configured entrypoint and default command run from there as its
// configured user answer PING and /readyz. The command is run as a process
// of this machine, not in a container: running containers is not possible
// in this sandbox (its cgroups), so the image's own network, mounts and
// user namespace are not what is tested — its files, user and command are.
func TestImageRunsFromItsUnpackedRootfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs the image's command as its user id, which needs root (CI runs as root)")
	}
	name := fmt.Sprintf("localhost/sluice-imagetest-%d", os.Getpid())
	build := exec.Command("../scripts/image.sh")
	build.Env = append(os.Environ(), "IMAGE="+name, "ENGINE=podman")
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	tag := strings.TrimSpace(string(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:]))
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", tag).Run() })
	dir := t.TempDir()
	// The image's user walks into the unpacked root: the test's
	// directories (0700, root's) must let it through.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(dir, "image.tar")
	if out, err := exec.Command("podman", "save", "--format", "oci-archive", "-o", archive, tag).CombinedOutput(); err != nil {
		t.Fatalf("podman save: %v\n%s", err, out)
	}
	layout := filepath.Join(dir, "layout")
	untar(t, archive, layout, false)
	var index ociIndex
	readJSON(t, filepath.Join(layout, "index.json"), &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json names %d manifests, want 1", len(index.Manifests))
	}
	var manifest ociManifest
	readJSON(t, blob(layout, index.Manifests[0].Digest), &manifest)
	var config ociConfig
	readJSON(t, blob(layout, manifest.Config.Digest), &config)
	rootfs := filepath.Join(dir, "rootfs")
	for _, l := range manifest.Layers {
		untar(t, blob(layout, l.Digest), rootfs, strings.HasSuffix(l.MediaType, "gzip"))
	}

	c := config.Config
	uid, gid, ok := strings.Cut(c.User, ":")
	u, err1 := strconv.Atoi(uid)
	g, err2 := strconv.Atoi(gid)
	if !ok || err1 != nil || err2 != nil || u == 0 || g == 0 {
		t.Fatalf("the image's user is %q, want a numeric non-root uid:gid", c.User)
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("/data is not a volume: %v", c.Volumes)
	}
	for _, p := range []string{"6379/tcp", "8080/tcp", "8081/tcp", "16379/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("%s not exposed: %v", p, c.ExposedPorts)
		}
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "data")); err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != u {
		t.Fatalf("/data is not the user's: %v %v", fi, err)
	}
	entry := filepath.Join(rootfs, c.Entrypoint[0])
	version, err := exec.Command(entry, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "sluice " + c.Labels["org.opencontainers.image.version"] + "\n"; string(version) != want {
		t.Fatalf("--version says %q, the image's label %q", version, want)
	}
	if files, _ := os.ReadDir(rootfs); len(files) != 3 { // data, etc, usr
		t.Errorf("the root holds more than the binary, etc and data: %v", files)
	}

	// The command as configured, its listening addresses moved from the
	// container's 0.0.0.0 to loopback ports of this test's and its /data
	// to the unpacked one.
	argv := append(append([]string{entry}, c.Entrypoint[1:]...), c.Cmd...)
	ports := map[string]string{}
	for i, a := range argv {
		if port, ok := strings.CutPrefix(a, "0.0.0.0:"); ok {
			ports[port] = freeAddr(t)
			argv[i] = ports[port]
		}
		if a == "/data" {
			argv[i] = filepath.Join(rootfs, "data")
		}
	}
	if ports["6379"] == "" || ports["8080"] == "" {
		t.Fatalf("the default command does not serve RESP on 6379 and HTTP on 8080: %q", c.Cmd)
	}
	s := &Server{t: t, Addr: ports["6379"], Argv: argv, Dir: rootfs,
		Attr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}}}
	s.Start()
	t.Cleanup(s.Kill)
	if v, err := s.Client().Ping(ctx(t)).Result(); err != nil || v != "PONG" {
		t.Fatalf("PING: %q %v\n%s", v, err, s.Logs())
	}
	resp, err := http.Get("http://" + ports["8080"] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %s", resp.Status)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "Uid:" && f[1] != uid {
			t.Fatalf("runs as uid %s, want %s", f[1], uid)
		}
	}
	// It wrote its state where the image keeps it, as that user.
	if err := s.Client().Do(ctx(t), "CL.THROTTLE", "k", "1", "1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	entries, _ := os.ReadDir(filepath.Join(rootfs, "data"))
	if len(entries) == 0 {
		t.Fatal("nothing written under /data")
	}
}

// blob is the path of a digest's blob in an OCI layout.
func blob(layout, digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(layout, "blobs", algo, hex)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// untar unpacks a tar archive (gzipped when gz) into dir, keeping its
// owners and modes; a name that would leave dir fails the test.
func untar(t *testing.T, path, dir string, gz bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = z
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) && target != filepath.Clean(dir) {
			t.Fatalf("%s: %q leaves the directory", path, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, os.FileMode(h.Mode)&os.ModePerm); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			w, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(h.Mode)&os.ModePerm)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			w.Close()
		default:
			continue
		}
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
			t.Fatal(err)
		}
		os.Chmod(target, os.FileMode(h.Mode)&os.ModePerm)
	}
}
