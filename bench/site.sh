# Sourced by the benchmarks: helpers to serve a generated site with nginx on loopback.
#   free_port                  prints a free loopback port
#   serve_site DIR PAGES WORK  generates PAGES pages into DIR and serves them; sets $site_port
#                              and writes nginx's pid to WORK/nginx.pid

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

serve_site() {
  local dir=$1 pages=$2 work=$3
  if ! command -v nginx >/dev/null; then
    echo "installing nginx" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  fi
  python3 bench/gen_site.py "$dir" "$pages"
  site_port=$(free_port)
  cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  types { text/html html; }
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
  server { listen 127.0.0.1:$site_port; root $dir; }
}
CONF
  mkdir -p "$work/tmp"
  chmod -R a+rX "$work"
  nginx -c "$work/nginx.conf"
}
