/* ucp_config_print with the flag sets an application uses, after
 * ucp_config_modify set TLS: each output follows a line "=== flags N".
 * Built against rucx's library and against UCX's, so that a test can
 * compare the two layouts. Exits 0 when the calls succeed. */
#include <ucp/api/ucp.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
    exit(1); } } while (0)

int main(void)
{
    static const int flag_sets[] = {
        UCS_CONFIG_PRINT_CONFIG,
        UCS_CONFIG_PRINT_HEADER,
        UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_HEADER,
        UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_COMMENT_DEFAULT,
        UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_HEADER |
            UCS_CONFIG_PRINT_COMMENT_DEFAULT,
        UCS_CONFIG_PRINT_DOC,
        UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_DOC,
    };
    ucp_config_t *config;
    size_t i;

    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK);
    CHECK(ucp_config_modify(config, "TLS", "tcp") == UCS_OK);
    for (i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); ++i) {
        printf("=== flags %d\n", flag_sets[i]);
        fflush(stdout);
        ucp_config_print(config, stdout, "title", flag_sets[i]);
        fflush(stdout);
    }
    ucp_config_release(config);
    return 0;
}
