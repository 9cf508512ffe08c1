-- AlterTable
ALTER TABLE "SlackInstallation" ADD COLUMN     "installedAt" TIMESTAMP(3);

