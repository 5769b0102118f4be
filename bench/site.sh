# Sourced by the benchmarks: helpers to serve a site with nginx on loopback.
#   free_port                  prints a free loopback port
#   serve_site DIR PAGES WORK  generates PAGES pages into DIR and serves them; sets $site_port
#                              and writes nginx's pid to WORK/nginx.pid
#   serve_docs WORK            serves Python 3.11's HTML documentation (530 pages of prose,
#                              tables and code blocks, 60 KB on average, from Debian's
#                              python3.11-doc, downloaded once into target/bench-docs); sets
#                              $site_port and $site_pages
#   start_nginx WORK SERVERS   starts nginx with SERVERS (its http block's lines) and its files
#                              in WORK
#   With FRONT_UPSTREAM set (an http://host:port), nginx also listens on $front_port and passes
#   every request there over connections it keeps open to its clients (the emulator closes
#   every connection after its answer; AWS keeps them open).

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ensure_nginx() {
  if ! command -v nginx >/dev/null; then
    echo "installing nginx" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  fi
}

serve_site() {
  local dir=$1 pages=$2 work=$3
  python3 bench/gen_site.py "$dir" "$pages"
  serve_dir "$dir" "$work"
}

serve_docs() {
  local work=$1 cache=target/bench-docs
  local dir=$cache/usr/share/doc/python3.11/html
  if [ ! -f "$dir/index.html" ]; then
    echo "downloading python3.11-doc from the Debian archive" >&2
    mkdir -p "$cache"
    (cd "$cache" && apt-get download -qq python3.11-doc 2>/dev/null && dpkg-deb -x python3.11-doc_*.deb .)
  fi
  site_pages=$(find "$dir" -name '*.html' | wc -l)
  # A copy inside WORK, which nginx's workers may read.
  cp -rL "$dir" "$work/site" 2>/dev/null || true
  serve_dir "$work/site" "$work"
}

# Serves DIR with nginx on a free loopback port.
serve_dir() {
  local dir=$1 work=$2
  site_port=$(free_port)
  local front=
  if [ -n "${FRONT_UPSTREAM:-}" ]; then
    front_port=$(free_port)
    front="server { listen 127.0.0.1:$front_port; keepalive_requests 1000000; client_max_body_size 0;
    location / { proxy_pass $FRONT_UPSTREAM; proxy_set_header Host \$http_host; proxy_buffering off; } }"
  fi
  start_nginx "$work" "  types { text/html html; }
  server { listen 127.0.0.1:$site_port; root $dir; }
  $front"
}

# Starts nginx with SERVERS (the lines of its http block: servers and their settings), its
# pid in WORK/nginx.pid and its configuration, log and temporary files in WORK.
start_nginx() {
  local work=$1 servers=$2
  ensure_nginx
  mkdir -p "$work/tmp"
  cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
$servers
}
CONF
  chmod -R a+rX "$work"
  nginx -c "$work/nginx.conf"
}
