package knownimages

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/restartbed/restartbed/fakekubelet/shell"
)

// pause is the pause image's /pause: it sleeps until SIGTERM or SIGINT, says so on stderr and
// exits 0 (build/pause/linux/pause.c).
func pause(ctx context.Context, inv *shell.Invocation) int {
	if slices.Contains(inv.Args[1:], "-v") {
		fmt.Fprintln(inv.Env.Stdout, "pause.c v3.10")
		return 0
	}
	if !terminated(ctx, inv) {
		return shell.ExitKilled
	}
	fmt.Fprintln(inv.Env.Stderr, "Shutting down, got signal: Terminated")
	return 0
}

// nginxEntrypoint is the nginx image's /docker-entrypoint.sh: it says the configuration is done
// and execs its arguments, which then get the container's signals.
func nginxEntrypoint(ctx context.Context, inv *shell.Invocation) int {
	if len(inv.Args) < 2 {
		return 0
	}
	fmt.Fprintln(inv.Env.Stdout, "/docker-entrypoint.sh: Configuration complete; ready for start up")
	return inv.Exec(ctx, inv.Args[1:])
}

// nginxPage is nginx's default index page.
const nginxPage = `<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and
working. Further configuration is required.</p>
</body>
</html>
`

// nginx serves its default page on port 80 until SIGTERM (fast shutdown) or SIGQUIT, and exits 0.
func nginx(ctx context.Context, inv *shell.Invocation) int {
	if slices.Contains(inv.Args[1:], "-v") || slices.Contains(inv.Args[1:], "-V") {
		fmt.Fprintln(inv.Env.Stderr, "nginx version: nginx/1.27.3")
		return 0
	}
	return serveUntilTerm(ctx, inv, 80, indexPage("nginx/1.27.3", nginxPage), 0, bindFailed(inv, "nginx", 80))
}

// httpd is the httpd image's httpd-foreground: "It works!" on port 80 until SIGTERM, exit 0.
func httpd(ctx context.Context, inv *shell.Invocation) int {
	return serveUntilTerm(ctx, inv, 80, indexPage("Apache/2.4.62 (Unix)", "<html><body><h1>It works!</h1></body></html>\n"), 0, bindFailed(inv, "httpd", 80))
}

// indexPage serves page at / and /index.html as the named server, and 404 elsewhere.
func indexPage(server, page string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", server)
		if r.URL.Path != "/" && r.URL.Path != "/index.html" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}
}

// bindFailed says on stderr, as nginx and httpd do, that the server could not listen.
func bindFailed(inv *shell.Invocation, name string, port int) func(error) {
	return func(err error) {
		fmt.Fprintf(inv.Env.Stderr, "%s: [emerg] bind() to 0.0.0.0:%d failed (%v)\n", name, port, err)
	}
}
