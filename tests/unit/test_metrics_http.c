/* Unit tests for metrics_http.h: --metrics-listen addresses parsed or
 * refused with the reason, and a real server on loopback answering GET
 * /metrics with the page, 404 and 405 otherwise, refusing a port in use. */
#include "metrics_http.h"
#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int parses(const char *address)
{
    struct sockaddr_storage a;
    socklen_t len;
    char err[256];
    return metrics_listen_parse(address, &a, &len, err, sizeof(err)) == 0;
}

static int refused_with(const char *address, const char *word)
{
    struct sockaddr_storage a;
    socklen_t len;
    char err[256] = "";
    return metrics_listen_parse(address, &a, &len, err, sizeof(err)) < 0 &&
           strstr(err, word) != NULL;
}

static void render(void *arg, struct promtext *p)
{
    int *scrapes = arg;
    (*scrapes)++;
    promtext_family(p, "test_scrapes_total", "counter", "Scrapes so far.");
    promtext_sample(p, "test_scrapes_total", NULL, *scrapes);
}

/* Sends request to 127.0.0.1:port, reads the whole answer into out. */
static int fetch(int port, const char *request, char *out, size_t outlen)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    if (write(fd, request, strlen(request)) < 0) {
        close(fd);
        return -1;
    }
    size_t n = 0;
    ssize_t r;
    while (n + 1 < outlen && (r = read(fd, out + n, outlen - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fd);
    return (int)n;
}

int main(void)
{
    CHECK(parses("127.0.0.1:9100"));
    CHECK(parses("0.0.0.0:0"));
    CHECK(parses("localhost:65535"));
    CHECK(parses("[::1]:9100"));
    CHECK(refused_with("9100", "HOST:PORT"));
    CHECK(refused_with(":9100", "HOST:PORT"));
    CHECK(refused_with(NULL, "HOST:PORT"));
    CHECK(refused_with("127.0.0.1:", "port"));
    CHECK(refused_with("127.0.0.1:65536", "port"));
    CHECK(refused_with("127.0.0.1:-1", "port"));
    CHECK(refused_with("127.0.0.1: 80", "port"));
    CHECK(refused_with("127.0.0.1:80x", "port"));
    CHECK(refused_with("1.2.3:80", "not an IPv4"));
    CHECK(refused_with("example.com:80", "not an IPv4"));
    CHECK(refused_with("[::1:80", "brackets"));
    CHECK(refused_with("[]:80", "brackets"));
    CHECK(refused_with("[::g]:80", "not an IPv6"));

    char err[256];
    int scrapes = 0;
    metrics_server *s = metrics_server_start("127.0.0.1:0", render, &scrapes, err, sizeof(err));
    CHECK(s != NULL);
    if (s == NULL) {
        fprintf(stderr, "%s\n", err);
        return check_report("test_metrics_http");
    }
    int port = metrics_server_port(s);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%d", port);
    CHECK(port > 0 && strcmp(metrics_server_address(s), want) == 0);

    char page[8192];
    CHECK(fetch(port, "GET /metrics HTTP/1.0\r\n\r\n", page, sizeof(page)) > 0);
    CHECK(strncmp(page, "HTTP/1.0 200", 12) == 0 || strncmp(page, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(page, "Content-Type: text/plain; version=0.0.4; charset=utf-8") != NULL);
    CHECK(strstr(page, "\r\n\r\n# HELP test_scrapes_total Scrapes so far.\n") != NULL);
    CHECK(strstr(page, "\ntest_scrapes_total 1\n") != NULL);
    CHECK(strstr(page, "\n# TYPE process_start_time_seconds gauge\n") != NULL);
    CHECK(fetch(port, "GET /metrics HTTP/1.0\r\n\r\n", page, sizeof(page)) > 0);
    CHECK(strstr(page, "\ntest_scrapes_total 2\n") != NULL);
    CHECK(fetch(port, "GET / HTTP/1.0\r\n\r\n", page, sizeof(page)) > 0);
    CHECK(strstr(page, " 404 ") != NULL);
    CHECK(fetch(port, "DELETE /metrics HTTP/1.0\r\n\r\n", page, sizeof(page)) > 0);
    CHECK(strstr(page, " 405 ") != NULL && strstr(page, "Allow: GET, HEAD") != NULL);
    CHECK_EQ_INT(scrapes, 2);

    /* The same port again: refused at once, saying so. */
    metrics_server *again = metrics_server_start(want, render, &scrapes, err, sizeof(err));
    CHECK(again == NULL && strstr(err, "in use") != NULL && strstr(err, want) != NULL);
    metrics_server_stop(s);
    /* Stopped: the port is free again, and connections are refused. */
    CHECK(fetch(port, "GET /metrics HTTP/1.0\r\n\r\n", page, sizeof(page)) < 0);
    metrics_server_stop(NULL);
    return check_report("test_metrics_http");
}
