/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The floor of a TCP ping-pong on this host: two processes joined by one
 * loopback TCP connection (TCP_NODELAY) send an 8-byte message back and
 * forth, busy-polling, with no protocol layer at all. It prints the
 * one-way latency (median and mean) in the units rucx-perftest and
 * ucx_perftest use for tag_lat, so a tcp transport's latency can be held
 * against what the kernel alone costs.
 *
 *   cc -O2 -o /tmp/tcp-floor benches/tcp-floor.c
 *   /tmp/tcp-floor MODE ITERS PORT
 *
 * MODE 0 polls with epoll_wait(0) and then recv(), the calls rucx's and
 * UCX's tcp transports make; MODE 1 polls with recv(MSG_DONTWAIT) alone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 10000
#define MSG 8

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void wait_msg(int fd, int ep, int mode, char *buf)
{
    size_t got = 0;
    while (got < MSG) {
        if (mode == 0) {
            struct epoll_event ev[16];
            if (epoll_wait(ep, ev, 16, 0) <= 0) {
                continue;
            }
        }
        ssize_t r = recv(fd, buf + got, MSG - got, MSG_DONTWAIT);
        if (r > 0) {
            got += (size_t)r;
        } else if (r == 0) {
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODE ITERS PORT\n", argv[0]);
        return 2;
    }
    int mode = atoi(argv[1]), iters = atoi(argv[2]), port = atoi(argv[3]);
    if (iters <= 0 || mode < 0 || mode > 1) {
        fprintf(stderr, "MODE is 0 or 1, ITERS above 0\n");
        return 2;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1)) {
        perror("bind/listen");
        return 1;
    }
    pid_t child = fork();
    int fd;
    if (child == 0) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
            perror("connect");
            return 1;
        }
    } else {
        fd = accept(ls, NULL, NULL);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    char buf[MSG] = {0};
    double *lat = malloc(sizeof(double) * (size_t)iters), start = 0;
    for (int i = 0; i < iters + WARMUP; i++) {
        double t = now_us();
        if (i == WARMUP) {
            start = t;
        }
        if (child) {
            send(fd, buf, MSG, 0);
            wait_msg(fd, ep, mode, buf);
            if (i >= WARMUP) {
                lat[i - WARMUP] = (now_us() - t) / 2;
            }
        } else {
            wait_msg(fd, ep, mode, buf);
            send(fd, buf, MSG, 0);
        }
    }
    if (child) {
        double mean = (now_us() - start) / iters / 2;
        qsort(lat, (size_t)iters, sizeof(double), by_value);
        printf("mode %d: one-way latency p50 %.3f us, mean %.3f us\n", mode, lat[iters / 2], mean);
        waitpid(child, NULL, 0);
    }
    return 0;
}
